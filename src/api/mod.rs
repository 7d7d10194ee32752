//! Types for the APIs imagegate uses but does not own.
//!
//! - [`imagestream`]: `image.openshift.io/v1` ImageStream (watched by the source, patched by the
//!   promotion), plus the virtual ImageStreamTag and ImageStreamImage views.
//! - [`image`]: the cluster-scoped `image.openshift.io/v1` Image, the metadata a check reads.
//! - [`imagestreamimport`]: `image.openshift.io/v1` ImageStreamImport, an import now (the
//!   operator CLI's `import`).
//! - [`customrun`]: `tekton.dev/v1beta1` CustomRun, the unit of work of the custom task.
//! - [`pipelinerun`]: `tekton.dev/v1` PipelineRun and TaskRun, read as the proof of validation.
//! - [`selector`]: a label selector's query syntax, checked as the API server parses it (the
//!   `--selector` flag and the adapter's sources both).
//!
//! Only the fields imagegate reads or writes are modelled; unknown fields are ignored when
//! reading. The JSON names and the null/omitted rules follow the Go types field by field
//! (openshift/api `image/v1/types.go`, tektoncd/pipeline `customrun_types.go`,
//! `pipelinerun_types.go`, `taskrun_types.go`): a Go field
//! without `omitempty` is always serialized (as `null` when empty), one with `omitempty` is
//! skipped when empty. Every type is pinned by `tests/it/api_types.rs` (URL paths and a round-trip
//! over the real objects in `tests/fixtures/`).

use serde::{Deserialize, Deserializer};

/// The HTTP status of an API server's refusal (None when there was no answer).
pub(crate) fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Implements [`kube::Resource`] for a type with a `metadata: ObjectMeta` field and no
/// `DynamicType`, for the kinds the `CustomResource` derive does not fit (virtual resources and
/// types without a spec/status layout).
macro_rules! static_resource {
    ($ty:ty, group: $group:literal, version: $version:literal, kind: $kind:literal,
     plural: $plural:literal, scope: $scope:ty) => {
        impl ::kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                $kind.into()
            }

            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                $group.into()
            }

            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                $version.into()
            }

            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
                concat!($group, "/", $version).into()
            }

            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                $plural.into()
            }

            fn meta(&self) -> &::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub mod customrun;
pub mod image;
pub mod imagestream;
pub mod imagestreamimport;
pub mod pipelinerun;
pub mod selector;

pub use customrun::{
    Condition, CustomRun, CustomRunResult, CustomRunSpec, CustomRunStatus, CustomTaskRef,
    EmbeddedCustomRunSpec, Param, ParamValue, ParseDurationError, parse_go_duration, tekton,
};
pub use image::{DockerConfig, DockerImageMetadata, Image, ImageLayer, ImageManifest};
pub use imagestream::{
    ImageLookupPolicy, ImageStream, ImageStreamImage, ImageStreamSpec, ImageStreamStatus,
    ImageStreamTag, NamedTagEventList, TagEvent, TagEventCondition, TagImportPolicy, TagReference,
    TagReferencePolicy, digest_from_reference,
};
pub use imagestreamimport::{
    ImageImportSpec, ImageImportStatus, ImageStreamImport, ImageStreamImportSpec,
    ImageStreamImportStatus, ImportResult,
};
pub use pipelinerun::{
    ChildReference, PipelineRef, PipelineRun, PipelineRunSpec, PipelineRunStatus, TaskRun,
    TaskRunSpec, TaskRunStatus,
};

/// Deserializes `null` as the type's default, for fields that Go never omits but that real
/// objects (hand-written YAML, older servers) do send as `null`, such as `tags: null`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `skip_serializing_if` for Go `bool` fields tagged `omitempty`.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
