//! How the text names a task: `task 3 "name"` where it has a given name, `tokio task 7` where not.

use std::fmt::{self, Display, Write};

use crate::model::{Dump, FastMap, TaskView};
use crate::view::{TaskId, no_breaks};

/// Task names by id, to write `task 3 "name"` for any task the dump mentions.
pub(crate) struct Labels<'a>(pub(crate) FastMap<u64, Option<&'a str>>);

pub(crate) struct Label<'a>(u64, Option<&'a str>);

impl Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

impl Label<'_> {
    /// Written piece by piece: every task's section starts with one.
    pub(crate) fn write_to<W: Write + ?Sized>(&self, out: &mut W) -> fmt::Result {
        TaskId(self.0).write_to(out)?;
        if let Some(name) = self.1 {
            out.write_str(" \"")?;
            out.write_str(&no_breaks(name))?;
            out.write_char('"')?;
        }
        Ok(())
    }
}

impl Labels<'_> {
    pub(crate) fn of(&self, id: u64) -> Label<'_> {
        Label(id, self.0.get(&id).copied().flatten())
    }
}

/// The labels of the tasks `ids` only: one section of a dump of 100,000 tasks (the live view's detail
/// pane, at each redraw) names a few, and a map of them all would cost more than the section.
pub(crate) fn labels_for<'a>(dump: &'a Dump, ids: &[u64]) -> Labels<'a> {
    Labels(
        ids.iter()
            .filter_map(|&id| dump.task(id))
            .map(|t| (t.id, t.name.as_deref()))
            .collect(),
    )
}

/// Every task's label.
pub(crate) fn labels_of(dump: &Dump) -> Labels<'_> {
    Labels(
        dump.tasks
            .iter()
            .map(|t| (t.id, t.name.as_deref()))
            .collect(),
    )
}

/// A task as the dump names it: `task 3 "name"` or `tokio task 7`.
pub fn task_label(t: &TaskView) -> String {
    task_label_parts(t.id, t.name.as_deref())
}

/// [`task_label`] of a task known by its id and given name.
pub fn task_label_parts(id: u64, name: Option<&str>) -> String {
    Label(id, name).to_string()
}
