//! The kubectl plugin: kubectl (and oc) run an executable named `kubectl-imagegate` on the
//! `PATH` for `kubectl imagegate ...`, with the remaining arguments. The `imagegate` binary
//! installed (or symlinked) under that name behaves as the operator commands alone
//! ([`crate::cli::ops::KubectlImagegate`]); kubectl passes no flags of its own to a plugin, so
//! `--kubeconfig`, `--context` and `-n` go after the command, as in `kubectl imagegate status -n ds`,
//! and `KUBECONFIG` reaches it through the environment.

use std::ffi::OsStr;
use std::path::Path;

/// The executable name kubectl looks for.
pub(crate) const EXECUTABLE: &str = "kubectl-imagegate";

/// Whether the program was started as the plugin (the file name of `argv[0]`, with or without
/// `.exe`).
pub fn invoked_as_plugin(argv0: Option<&OsStr>) -> bool {
    argv0
        .and_then(|a| Path::new(a).file_name())
        .and_then(OsStr::to_str)
        .is_some_and(|n| n == EXECUTABLE || n == "kubectl-imagegate.exe")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_recognised_by_its_file_name_only() {
        for yes in [
            "kubectl-imagegate",
            "/usr/local/bin/kubectl-imagegate",
            "kubectl-imagegate.exe",
        ] {
            assert!(invoked_as_plugin(Some(OsStr::new(yes))), "{yes}");
        }
        for no in [
            "imagegate",
            "/opt/kubectl-imagegate/imagegate",
            "kubectl-imagegate-old",
            "",
        ] {
            assert!(!invoked_as_plugin(Some(OsStr::new(no))), "{no}");
        }
        assert!(!invoked_as_plugin(None));
    }
}
