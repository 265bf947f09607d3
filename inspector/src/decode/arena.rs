//! The shown lines of one task's chain while they are placed: an arena of nodes, each after its
//! parent, turned into frame trees at the end without recursion.

use std::sync::Arc;

use crate::model::{FrameInfo, FrameNode};

/// Shown nodes, children always after their parent.
#[derive(Default)]
pub(super) struct Arena {
    pub(super) nodes: Vec<ArenaNode>,
    roots: Vec<usize>,
}

pub(super) struct ArenaNode {
    pub(super) parent: Option<usize>,
    pub(super) info: Arc<FrameInfo>,
    pub(super) awaits: Vec<u64>,
    pub(super) children: Vec<usize>,
}

impl Arena {
    pub(super) fn push(&mut self, under: Option<usize>, info: Arc<FrameInfo>) -> usize {
        let i = self.nodes.len();
        self.nodes.push(ArenaNode {
            parent: under,
            info,
            awaits: Vec::new(),
            children: Vec::new(),
        });
        match under {
            Some(p) => self.nodes[p].children.push(i),
            None => self.roots.push(i),
        }
        i
    }

    /// Builds the trees bottom-up (children have higher indices), so depth costs no recursion.
    pub(super) fn into_trees(self) -> Vec<FrameNode> {
        let mut built: Vec<Option<FrameNode>> = Vec::with_capacity(self.nodes.len());
        built.resize_with(self.nodes.len(), || None);
        let mut children_of: Vec<Vec<usize>> = Vec::with_capacity(self.nodes.len());
        let mut infos = Vec::with_capacity(self.nodes.len());
        for n in self.nodes {
            children_of.push(n.children);
            let mut awaits = n.awaits;
            awaits.sort_unstable();
            awaits.dedup();
            infos.push(Some((n.info, awaits)));
        }
        for i in (0..infos.len()).rev() {
            let (meta, awaits_tasks) = infos[i].take().expect("each node built once");
            // Exact sizes here and for the roots: `collect` through a filter starts at room for four,
            // and a dump keeps every one of these lists.
            let mut children = Vec::with_capacity(children_of[i].len());
            children.extend(children_of[i].iter().filter_map(|&c| built[c].take()));
            built[i] = Some(FrameNode {
                id: 0,
                meta,
                awaits_tasks,
                children,
            });
        }
        let mut roots = Vec::with_capacity(self.roots.len());
        roots.extend(self.roots.iter().filter_map(|&r| built[r].take()));
        roots
    }
}
