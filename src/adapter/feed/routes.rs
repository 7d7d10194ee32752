//! Which joined sources a change goes to (pure): a source joined for some namespaces takes the
//! changes of those namespaces; one joined for every namespace takes them all.

use std::collections::{BTreeMap, HashMap};

use crate::adapter::index::SourceId;

/// The sources joined to a feed, by the namespaces they take, each with what reaches it (`T`:
/// its channel).
#[derive(Debug)]
pub(crate) struct Routes<T> {
    /// Namespace -> the sources that take it.
    by_namespace: HashMap<String, BTreeMap<SourceId, T>>,
    /// The sources that take every namespace.
    everywhere: BTreeMap<SourceId, T>,
    /// Each source's namespaces (None: every namespace), to undo its join.
    joined: BTreeMap<SourceId, Option<Vec<String>>>,
}

impl<T> Default for Routes<T> {
    fn default() -> Self {
        Routes {
            by_namespace: HashMap::new(),
            everywhere: BTreeMap::new(),
            joined: BTreeMap::new(),
        }
    }
}

impl<T: Clone> Routes<T> {
    /// `id` takes the changes of `namespaces` (None: every namespace) through `to`, instead of
    /// what it took before.
    pub(crate) fn join(&mut self, id: SourceId, namespaces: Option<Vec<String>>, to: T) {
        self.leave(&id);
        match &namespaces {
            None => {
                self.everywhere.insert(id.clone(), to);
            }
            Some(names) => {
                for ns in names {
                    self.by_namespace
                        .entry(ns.clone())
                        .or_default()
                        .insert(id.clone(), to.clone());
                }
            }
        }
        self.joined.insert(id, namespaces);
    }
}

impl<T> Routes<T> {
    /// `id` takes nothing more.
    pub(crate) fn leave(&mut self, id: &SourceId) {
        match self.joined.remove(id) {
            Some(None) => {
                self.everywhere.remove(id);
            }
            Some(Some(names)) => {
                for ns in names {
                    if let Some(sources) = self.by_namespace.get_mut(&ns) {
                        sources.remove(id);
                        if sources.is_empty() {
                            self.by_namespace.remove(&ns);
                        }
                    }
                }
            }
            None => {}
        }
    }

    /// The sources that take a change in `namespace`, each once.
    pub(crate) fn of(&self, namespace: &str) -> impl Iterator<Item = (&SourceId, &T)> {
        self.everywhere
            .iter()
            .chain(self.by_namespace.get(namespace).into_iter().flatten())
    }

    /// Every source joined, each once.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&SourceId, &T)> {
        self.joined.keys().filter_map(|id| {
            let to = match &self.joined[id] {
                None => self.everywhere.get(id),
                Some(names) => names
                    .first()
                    .and_then(|ns| self.by_namespace.get(ns))
                    .and_then(|s| s.get(id)),
            };
            to.map(|to| (id, to))
        })
    }

    /// How many sources are joined.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.joined.len()
    }

    /// Whether none is.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.joined.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> SourceId {
        ("ds".into(), name.into())
    }

    fn names(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    fn to<'a>(routes: &'a Routes<u8>, namespace: &str) -> Vec<(&'a str, u8)> {
        let mut got: Vec<(&str, u8)> = routes
            .of(namespace)
            .map(|(id, t)| (id.1.as_str(), *t))
            .collect();
        got.sort();
        got
    }

    #[test]
    fn a_change_goes_to_the_sources_of_its_namespace_and_to_those_of_every_namespace() {
        let mut routes = Routes::default();
        routes.join(id("a"), names(&["ds", "ml"]), 1);
        routes.join(id("b"), names(&["ml"]), 2);
        routes.join(id("all"), None, 3);
        assert_eq!(to(&routes, "ds"), [("a", 1), ("all", 3)]);
        assert_eq!(to(&routes, "ml"), [("a", 1), ("all", 3), ("b", 2)]);
        assert_eq!(to(&routes, "ops"), [("all", 3)]);
        let mut all: Vec<u8> = routes.all().map(|(_, t)| *t).collect();
        all.sort();
        assert_eq!(all, [1, 2, 3], "each source once, whatever it takes");
        assert_eq!(routes.len(), 3);
    }

    #[test]
    fn joining_again_replaces_what_a_source_took_and_leaving_undoes_it() {
        let mut routes = Routes::default();
        routes.join(id("a"), names(&["ds", "ml"]), 1);
        routes.join(id("a"), names(&["ops"]), 4);
        assert!(to(&routes, "ds").is_empty());
        assert!(to(&routes, "ml").is_empty());
        assert_eq!(to(&routes, "ops"), [("a", 4)]);
        routes.join(id("a"), None, 5);
        assert_eq!(to(&routes, "ds"), [("a", 5)]);
        assert_eq!(routes.all().count(), 1);
        routes.leave(&id("a"));
        routes.leave(&id("never-joined"));
        assert!(routes.is_empty());
        assert!(to(&routes, "ds").is_empty());
        assert!(routes.by_namespace.is_empty(), "no empty namespace is kept");
    }
}
