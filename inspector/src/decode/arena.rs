//! The shown lines of one task's chain while they are placed: an arena of nodes, each after its
//! parent, turned into frame trees at the end without recursion.

use std::sync::Arc;

use crate::model::values::{Local, WaitOn};
use crate::model::{FrameInfo, FrameNode, MAX_CHAIN_DEPTH};

/// What a node keeps into its frame: its info, edges, locals and wait target.
type Kept = (
    Arc<FrameInfo>,
    Vec<u64>,
    Vec<Local>,
    Option<Box<WaitOn>>,
    Vec<u64>,
);

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
    /// Its locals, still unread (see `crate::model::values`), when they were asked for.
    pub(super) locals: Vec<Local>,
    /// What its leaf waits for, unread.
    pub(super) waits_on: Option<Box<WaitOn>>,
    /// Walked futures inside its locals (see [`FrameNode::walked_within`]).
    pub(super) walked_within: Vec<u64>,
    pub(super) children: Vec<usize>,
}

impl Arena {
    pub(super) fn push(&mut self, under: Option<usize>, info: Arc<FrameInfo>) -> usize {
        let i = self.nodes.len();
        self.nodes.push(ArenaNode {
            parent: under,
            info,
            awaits: Vec::new(),
            locals: Vec::new(),
            waits_on: None,
            walked_within: Vec::new(),
            children: Vec::new(),
        });
        match under {
            Some(p) => self.nodes[p].children.push(i),
            None => self.roots.push(i),
        }
        i
    }

    /// Builds the trees bottom-up (children have higher indices), so depth costs no recursion. Nodes
    /// below [`MAX_CHAIN_DEPTH`] are counted into one cut frame under their ancestor at that depth,
    /// which takes their edges too.
    pub(super) fn into_trees(self) -> Vec<FrameNode> {
        let n = self.nodes.len();
        let mut built: Vec<Option<FrameNode>> = Vec::with_capacity(n);
        built.resize_with(n, || None);
        // Only a chain with more nodes than the depth can be too deep: most never pay for looking.
        let (kept_at, mut cut) = match n > MAX_CHAIN_DEPTH {
            true => self.cuts(),
            false => (Vec::new(), Vec::new()),
        };
        let mut children_of: Vec<Vec<usize>> = Vec::with_capacity(n);
        let mut infos: Vec<Option<Kept>> = Vec::with_capacity(n);
        for (i, node) in self.nodes.into_iter().enumerate() {
            children_of.push(node.children);
            match kept_at.get(i).copied().flatten() {
                Some(k) if k != i => {
                    let awaits = node.awaits;
                    let keeper: &mut Option<Kept> = &mut infos[k];
                    keeper
                        .as_mut()
                        .expect("a keeper comes first")
                        .1
                        .extend(awaits);
                    infos.push(None);
                }
                _ => infos.push(Some((
                    node.info,
                    node.awaits,
                    node.locals,
                    node.waits_on,
                    node.walked_within,
                ))),
            }
        }
        for i in (0..n).rev() {
            let Some((meta, mut awaits_tasks, locals, waits_on, walked_within)) = infos[i].take()
            else {
                continue;
            };
            awaits_tasks.sort_unstable();
            awaits_tasks.dedup();
            let cut_here = cut.get_mut(i).map(std::mem::take).unwrap_or(0);
            // Exact sizes here and for the roots: `collect` through a filter starts at room for four,
            // and a dump keeps every one of these lists.
            let mut children = Vec::with_capacity(children_of[i].len() + usize::from(cut_here > 0));
            children.extend(children_of[i].iter().filter_map(|&c| built[c].take()));
            if cut_here > 0 {
                children.push(FrameNode::cut(cut_here));
            }
            built[i] = Some(FrameNode {
                id: 0,
                meta,
                awaits_tasks,
                locals,
                waits_on,
                holds: Vec::new(),
                walked_within,
                children,
            });
        }
        let mut roots = Vec::with_capacity(self.roots.len());
        roots.extend(self.roots.iter().filter_map(|&r| built[r].take()));
        roots
    }

    /// For each node, the node at [`MAX_CHAIN_DEPTH`] it is cut into (itself if it is that node;
    /// `None` above it), and for each such node how many are cut into it.
    fn cuts(&self) -> (Vec<Option<usize>>, Vec<u64>) {
        let n = self.nodes.len();
        let mut depth = vec![1usize; n];
        let mut kept_at: Vec<Option<usize>> = vec![None; n];
        let mut cut = vec![0u64; n];
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(p) = node.parent else { continue };
            depth[i] = depth[p] + 1;
            kept_at[i] = match (kept_at[p], depth[i]) {
                (Some(k), _) => Some(k),
                (None, d) if d == MAX_CHAIN_DEPTH + 1 => Some(p),
                (None, _) => None,
            };
            if let Some(k) = kept_at[i] {
                cut[k] += 1;
            }
        }
        for (i, k) in kept_at.iter_mut().enumerate() {
            if k.is_none() && depth[i] == MAX_CHAIN_DEPTH {
                *k = Some(i);
            }
        }
        (kept_at, cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Source;

    /// Lines below `MAX_CHAIN_DEPTH` become one cut line counting them (whatever their branches),
    /// and the deepest kept line takes their edges; a shallow branch beside them is untouched.
    #[test]
    fn lines_below_the_deepest_kept_are_counted_into_one_with_their_edges() {
        let mut arena = Arena::default();
        let info = |name: &str| Arc::new(FrameInfo::new(name.into(), None, Source::Decoded));
        let root = arena.push(None, info("root"));
        arena.push(Some(root), info("shallow"));
        let mut at = root;
        for _ in 1..MAX_CHAIN_DEPTH + 5 {
            at = arena.push(Some(at), info("deep"));
        }
        let beside = arena.push(Some(at - 2), info("beside"));
        arena.nodes[beside].awaits.push(7);
        arena.nodes[at].awaits.push(9);
        let trees = arena.into_trees();
        let mut kept = &trees[0];
        assert_eq!(kept.children[0].meta.name, "shallow");
        for _ in 1..MAX_CHAIN_DEPTH {
            kept = kept.children.last().unwrap();
        }
        // Five deep lines and the one beside them.
        assert_eq!(kept.children.len(), 1);
        assert_eq!(kept.children[0].meta.name, "… 6 more frames");
        assert_eq!(kept.awaits_tasks, [7, 9]);
    }
}
