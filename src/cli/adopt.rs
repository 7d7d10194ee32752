//! `imagegate adopt`'s flags (docs/adopt.md).

use clap::{Args, ValueEnum};

use super::values;

/// `imagegate adopt NAMESPACE/NAME [flags]`, or `imagegate adopt --check [-n NS | -A]`.
#[derive(Debug, Args)]
pub struct AdoptArgs {
    /// The ImageStream to adopt, as NAMESPACE/NAME.
    #[arg(
        value_name = "NAMESPACE/NAME",
        value_parser = stream_ref,
        required_unless_present = "check",
        conflicts_with = "check"
    )]
    pub stream: Option<(String, String)>,

    /// Print the change as a unified diff of the YAML, and write nothing.
    #[arg(long, conflicts_with = "check")]
    pub dry_run: bool,

    /// The tag users are served (default: the only tag, or the one Open Data Hub recommends).
    #[arg(long, value_name = "TAG", value_parser = values::tag, conflicts_with = "check")]
    pub served_tag: Option<String>,

    /// The hidden candidate tag (default: `candidate`, or `<served>-candidate` for a custom image
    /// whose served tag sorts after `candidate`).
    #[arg(long, value_name = "TAG", value_parser = values::tag, conflicts_with = "check")]
    pub candidate_tag: Option<String>,

    /// The pull spec, by tag, the candidate imports on a schedule (default: what the served tag
    /// imports; required when that is a digest).
    #[arg(long, value_name = "PULLSPEC", conflicts_with = "check")]
    pub candidate_from: Option<String>,

    /// How consumers pull the tags adopt writes (default: the served tag's own policy).
    #[arg(long, value_enum, conflicts_with = "check")]
    pub reference_policy: Option<ReferencePolicyArg>,

    /// The name of the gated copy of an operator-shipped stream (default: `<name>-gated`).
    #[arg(long, value_name = "NAME", value_parser = values::namespace, conflicts_with = "check")]
    pub copy_name: Option<String>,

    /// Report the adopted or ImagePromotion-governed streams whose gated shape drifted (a
    /// candidate tag dropped by a wholesale edit, one the dashboard offers, ...); exits non-zero
    /// if it finds any.
    #[arg(long)]
    pub check: bool,

    /// With --check: the namespace to look in (default: the kubeconfig's namespace).
    #[arg(short = 'n', long, value_name = "NS", value_parser = values::namespace, requires = "check")]
    pub namespace: Option<String>,

    /// With --check: look in every namespace.
    #[arg(short = 'A', long, requires = "check", conflicts_with = "namespace")]
    pub all_namespaces: bool,
}

/// `--reference-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReferencePolicyArg {
    /// Consumers pull through the cluster's integrated registry.
    #[value(name = "Local", alias = "local")]
    Local,
    /// Consumers pull from the source registry.
    #[value(name = "Source", alias = "source")]
    Source,
}

impl ReferencePolicyArg {
    /// The `referencePolicy.type` value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReferencePolicyArg::Local => "Local",
            ReferencePolicyArg::Source => "Source",
        }
    }
}

/// `NAMESPACE/NAME`: a namespace (a DNS label) and an ImageStream name (a DNS subdomain).
pub(crate) fn stream_ref(value: &str) -> Result<(String, String), String> {
    let refuse = || {
        format!(
            "{value:?} is not NAMESPACE/NAME (a namespace, a '/', and an ImageStream name of \
             lowercase letters, digits, '-' and '.')"
        )
    };
    let (ns, name) = value.split_once('/').ok_or_else(refuse)?;
    let name_ok =
        !name.is_empty() && name.len() <= 253 && name.split('.').all(values::is_dns_label);
    if !values::is_dns_label(ns) || !name_ok {
        return Err(refuse());
    }
    Ok((ns.to_string(), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::stream_ref;

    #[test]
    fn a_stream_reference_is_namespace_slash_name() {
        assert_eq!(
            stream_ref("ds/jupyter-minimal-notebook"),
            Ok(("ds".into(), "jupyter-minimal-notebook".into()))
        );
        for bad in ["nb", "ds/", "/nb", "ds/nb/x", "DS/nb", "ds/Nb"] {
            assert!(stream_ref(bad).is_err(), "{bad}");
        }
    }
}
