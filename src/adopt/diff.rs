//! A planned write shown as a unified diff of the object's YAML (pure), what `--dry-run`
//! prints. The fields the server owns (`status`, `resourceVersion`, `managedFields`, ...) are
//! left out of both sides: they are not what adopt changes.

use serde_json::Value;

/// The metadata fields the server sets; never part of a diff.
const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
];

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The YAML adopt shows for an object: without `status` and the server's metadata.
pub(crate) fn yaml(object: &Value) -> String {
    let mut shown = object.clone();
    if let Some(obj) = shown.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in SERVER_METADATA {
                meta.remove(*key);
            }
        }
    }
    serde_norway::to_string(&shown).unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"))
}

/// The unified diff from `before` (`None`: the object is created) to `after`, with headers
/// `a/<label>` and `b/<label>`; empty when they render the same.
pub(crate) fn unified(label: &str, before: Option<&Value>, after: &Value) -> String {
    let old = before.map(yaml).unwrap_or_default();
    let new = yaml(after);
    let old_name = if before.is_some() {
        format!("a/{label}")
    } else {
        "/dev/null".to_string()
    };
    lines_diff(&old_name, &format!("b/{label}"), &old, &new)
}

/// The unified diff of two texts, line by line (a longest common subsequence: the objects are a
/// few hundred lines at most).
pub(crate) fn lines_diff(old_name: &str, new_name: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = edit_script(&a, &b);
    if ops.iter().all(|op| matches!(op, Op::Same(..))) {
        return String::new();
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Group the changes into hunks with CONTEXT lines around each.
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, Op::Same(..)))
        .map(|(i, _)| i)
        .collect();
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &i in &changed {
        let start = i.saturating_sub(CONTEXT);
        let end = (i + CONTEXT + 1).min(ops.len());
        match hunks.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => hunks.push((start, end)),
        }
    }
    for (start, end) in hunks {
        let (mut a_line, mut b_line) = (1, 1);
        for op in &ops[..start] {
            match op {
                Op::Same(..) => {
                    a_line += 1;
                    b_line += 1;
                }
                Op::Del(_) => a_line += 1,
                Op::Add(_) => b_line += 1,
            }
        }
        let slice = &ops[start..end];
        let a_len = slice.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let b_len = slice.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        let a_start = if a_len == 0 { a_line - 1 } else { a_line };
        let b_start = if b_len == 0 { b_line - 1 } else { b_line };
        out.push_str(&format!("@@ -{a_start},{a_len} +{b_start},{b_len} @@\n"));
        for op in slice {
            match op {
                Op::Same(l) => out.push_str(&format!(" {l}\n")),
                Op::Del(l) => out.push_str(&format!("-{l}\n")),
                Op::Add(l) => out.push_str(&format!("+{l}\n")),
            }
        }
    }
    out
}

#[derive(Debug)]
enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

fn edit_script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    // lcs[i][j]: the length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push(Op::Same(a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // On a tie the old line goes first, as diff(1) shows a change: `-old` then `+new`.
            ops.push(Op::Del(a[i]));
            i += 1;
        } else {
            ops.push(Op::Add(b[j]));
            j += 1;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_line_is_one_hunk_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            lines_diff("a/x", "b/x", old, new),
            "--- a/x\n+++ b/x\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
    }

    #[test]
    fn a_created_object_is_all_additions_from_dev_null() {
        let diff = unified("ns/x", None, &json!({"kind": "ImageStream"}));
        assert_eq!(
            diff,
            "--- /dev/null\n+++ b/ns/x\n@@ -0,0 +1,1 @@\n+kind: ImageStream\n"
        );
    }

    #[test]
    fn the_same_object_has_no_diff_and_server_fields_are_ignored() {
        let before = json!({"metadata": {"name": "x", "resourceVersion": "1"}, "status": {"a": 1}});
        let after = json!({"metadata": {"name": "x", "resourceVersion": "2"}, "status": {"a": 2}});
        assert_eq!(unified("ns/x", Some(&before), &after), "");
    }
}
