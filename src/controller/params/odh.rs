//! The Open Data Hub part of a request: the ImagePromotion's `odh` settings with their defaults,
//! and the `notebook-software` / `notebook-python-dependencies` params a `promote` run may carry
//! from its validation Task's results. Pure: a bad value is a message (`InvalidParams`).

use serde_json::Value;

use crate::controller::crd::{
    DEFAULT_BUILD_COMMIT_LABELS, DEFAULT_PYTHON_DEPENDENCIES_LABEL, DEFAULT_SOFTWARE_LABEL, Odh,
};

use super::Action;
use super::names;

/// What a run with `odh.enabled` writes for the dashboard, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OdhSettings {
    /// Image labels read for `notebook-build-commit`, first non-empty wins.
    pub build_commit_labels: Vec<String>,
    /// Image label read for `notebook-software` when no param gives it.
    pub software_label: String,
    /// Image label read for `notebook-python-dependencies` when no param gives it.
    pub python_dependencies_label: String,
    /// The `notebook-software` param (a JSON list, compact), if given.
    pub software: Option<String>,
    /// The `notebook-python-dependencies` param (a JSON list, compact), if given.
    pub python_dependencies: Option<String>,
}

/// The settings of `spec` with the two params' values (`None` when not given): `None` when
/// `odh.enabled` is off, in which case giving either param is an error, as it is for any action
/// but `promote`.
pub(crate) fn settings(
    spec: &Odh,
    action: Action,
    software: &str,
    python_dependencies: &str,
) -> Result<Option<OdhSettings>, String> {
    let given = [
        (names::NOTEBOOK_SOFTWARE, software),
        (names::NOTEBOOK_PYTHON_DEPENDENCIES, python_dependencies),
    ];
    for (name, value) in given {
        if value.is_empty() {
            continue;
        }
        if !spec.enabled {
            return Err(format!(
                "param {name:?} is only taken where the ImagePromotion sets odh.enabled: true"
            ));
        }
        if action != Action::Promote {
            return Err(format!(
                "param {name:?} is only taken by action promote, not {}",
                action.as_str()
            ));
        }
    }
    if !spec.enabled {
        return Ok(None);
    }
    let label = |given: &Option<String>, field: &str, default: &str| {
        let label = given.as_deref().unwrap_or(default);
        if label.trim().is_empty() {
            return Err(format!("odh.{field} must not be empty"));
        }
        Ok(label.to_string())
    };
    if let Some(i) = spec
        .build_commit_labels
        .iter()
        .position(|l| l.trim().is_empty())
    {
        return Err(format!("odh.buildCommitLabels[{i}] must not be empty"));
    }
    let build_commit_labels = if spec.build_commit_labels.is_empty() {
        DEFAULT_BUILD_COMMIT_LABELS
            .iter()
            .map(|l| l.to_string())
            .collect()
    } else {
        spec.build_commit_labels.clone()
    };
    Ok(Some(OdhSettings {
        build_commit_labels,
        software_label: label(
            &spec.software_label,
            "softwareLabel",
            DEFAULT_SOFTWARE_LABEL,
        )?,
        python_dependencies_label: label(
            &spec.python_dependencies_label,
            "pythonDependenciesLabel",
            DEFAULT_PYTHON_DEPENDENCIES_LABEL,
        )?,
        software: param_list(names::NOTEBOOK_SOFTWARE, software)?,
        python_dependencies: param_list(names::NOTEBOOK_PYTHON_DEPENDENCIES, python_dependencies)?,
    }))
}

fn param_list(name: &str, value: &str) -> Result<Option<String>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    notebook_list(value)
        .map(Some)
        .map_err(|why| format!("param {name:?}: {why}"))
}

/// The dashboard's shape of `notebook-software` and `notebook-python-dependencies`: a JSON list
/// of objects, each with a string `name` (and usually a `version`), as in the Open Data Hub
/// notebook manifests. Returns the list as compact JSON; otherwise why it is not one.
pub(crate) fn notebook_list(text: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("is not JSON ({e}); expected a list like [{{\"name\":\"Python\",\"version\":\"v3.12\"}}]"))?;
    let Some(items) = value.as_array() else {
        return Err("is not a JSON list of {\"name\", \"version\"} objects".into());
    };
    if let Some(i) = items
        .iter()
        .position(|item| !item.get("name").is_some_and(Value::is_string))
    {
        return Err(format!("item {i} is not an object with a string \"name\""));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on() -> Odh {
        Odh {
            enabled: true,
            ..Odh::default()
        }
    }

    #[test]
    fn off_means_no_settings_and_refuses_the_params() {
        assert_eq!(settings(&Odh::default(), Action::Promote, "", ""), Ok(None));
        let err = settings(&Odh::default(), Action::Promote, "[]", "").unwrap_err();
        assert!(err.contains("odh.enabled"), "{err}");
    }

    #[test]
    fn on_takes_the_default_labels_and_the_params_compacted() {
        let got = settings(
            &on(),
            Action::Promote,
            r#"[ {"name": "Python", "version": "v3.12"} ]"#,
            "",
        )
        .unwrap()
        .unwrap();
        assert_eq!(got.build_commit_labels[0], "vcs-ref");
        assert_eq!(got.software_label, DEFAULT_SOFTWARE_LABEL);
        assert_eq!(
            got.software.as_deref(),
            Some(r#"[{"name":"Python","version":"v3.12"}]"#)
        );
        assert_eq!(got.python_dependencies, None);
    }

    #[test]
    fn the_params_must_be_lists_of_named_objects_given_to_promote() {
        for bad in [
            "Python 3.12",
            r#"{"name":"Python"}"#,
            r#"[{"version":"1"}]"#,
            "[1]",
        ] {
            let err = settings(&on(), Action::Promote, bad, "").unwrap_err();
            assert!(
                err.starts_with("param \"notebook-software\""),
                "{bad}: {err}"
            );
        }
        let err = settings(&on(), Action::Begin, "", "[]").unwrap_err();
        assert!(err.contains("only taken by action promote"), "{err}");
    }

    #[test]
    fn empty_label_names_are_refused() {
        let spec = Odh {
            build_commit_labels: vec!["vcs-ref".into(), " ".into()],
            ..on()
        };
        let err = settings(&spec, Action::Promote, "", "").unwrap_err();
        assert_eq!(err, "odh.buildCommitLabels[1] must not be empty");
        let spec = Odh {
            software_label: Some(String::new()),
            ..on()
        };
        assert!(settings(&spec, Action::Promote, "", "").is_err());
    }
}
