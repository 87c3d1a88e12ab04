//! The order in which the export lays out a session tree (pure; indices only).
//!
//! Every entry appears exactly once, in depth-first order where, at each fork, the child on the
//! current branch (root → leaf) comes first and the others follow in file order. So the page
//! starts with the current branch as one unbroken run, and every other branch follows as a
//! segment that begins at its fork; an entry always comes after its ancestors, which lets the
//! page's script show any one branch by hiding the rest, without moving anything.
//!
//! The sidebar tree nests a list at each fork (one sub-list per child); beyond [`MAX_NEST`]
//! nested forks the lists stay flat (rows mark where a branch starts), which keeps the markup
//! within what browsers parse as nested elements. The walk is iterative: a 10,000-deep chain
//! costs no stack.

/// Forks nested deeper than this are laid out flat in the sidebar.
pub const MAX_NEST: usize = 40;

/// One step of the sidebar tree's markup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The row of entry `i`; `branch_start` when it begins a branch inside a flattened fork.
    Row {
        i: usize,
        branch_start: bool,
    },
    ForkOpen,
    BranchOpen,
    BranchClose,
    ForkClose,
}

/// The layout of one session tree.
#[derive(Debug, Default)]
pub struct Layout {
    /// Entry indices in page order.
    pub order: Vec<usize>,
    /// Per entry: on the current branch (root → leaf).
    pub on_path: Vec<bool>,
    /// Per entry: its parent as used for the layout (`None` at a root or a broken link).
    pub parent: Vec<Option<usize>>,
    /// Per entry: has no children.
    pub is_leaf: Vec<bool>,
    /// The sidebar's markup steps.
    pub steps: Vec<Step>,
    /// How many entries the current branch has (they come first in `order`).
    pub path_len: usize,
}

impl Layout {
    /// Whether the entry at position `pos` of [`Layout::order`] starts a new segment (a
    /// branch after the current one, or another root).
    pub fn starts_segment(&self, pos: usize) -> bool {
        if pos == 0 {
            return false;
        }
        let (i, prev) = (self.order[pos], self.order[pos - 1]);
        self.parent[i] != Some(prev) || self.on_path[i] != self.on_path[prev]
    }

    /// Number of branches (leaves).
    pub fn branches(&self) -> usize {
        self.is_leaf.iter().filter(|l| **l).count()
    }
}

enum Work {
    Visit {
        i: usize,
        nest: usize,
        branch_start: bool,
    },
    Emit(Step),
}

/// Lay out `n` entries whose parents are given by `parent_of` (indices), with the current leaf.
pub fn layout(n: usize, parent_of: impl Fn(usize) -> Option<usize>, leaf: Option<usize>) -> Layout {
    let parent: Vec<Option<usize>> = (0..n)
        .map(|i| parent_of(i).filter(|&p| p < n && p != i))
        .collect();
    let mut on_path = vec![false; n];
    let mut path_len = 0;
    let mut cur = leaf.filter(|&l| l < n);
    while let Some(i) = cur {
        if on_path[i] {
            break; // a cycle
        }
        on_path[i] = true;
        path_len += 1;
        cur = parent[i];
    }
    // Children in file order, as offsets into one array (CSR).
    let mut count = vec![0usize; n + 1];
    for p in parent.iter().flatten() {
        count[*p + 1] += 1;
    }
    for k in 1..=n {
        count[k] += count[k - 1];
    }
    let mut fill = count.clone();
    let mut kids = vec![0usize; count[n]];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            kids[fill[*p]] = i;
            fill[*p] += 1;
        }
    }
    let children = |i: usize| &kids[count[i]..count[i + 1]];
    let is_leaf: Vec<bool> = (0..n).map(|i| children(i).is_empty()).collect();

    // Children with the on-path one first.
    fn ordered(list: &[usize], on_path: &[bool]) -> Vec<usize> {
        let mut v: Vec<usize> = list.iter().copied().filter(|&c| on_path[c]).collect();
        v.extend(list.iter().copied().filter(|&c| !on_path[c]));
        v
    }

    let roots: Vec<usize> = ordered(
        &(0..n).filter(|&i| parent[i].is_none()).collect::<Vec<_>>(),
        &on_path,
    );
    let mut out = Layout {
        order: Vec::with_capacity(n),
        on_path,
        parent,
        is_leaf,
        steps: Vec::with_capacity(n + 16),
        path_len,
    };
    let mut visited = vec![false; n];
    let mut stack: Vec<Work> = Vec::new();
    let mut pending_roots = roots.into_iter();
    let mut scan = 0; // for entries unreachable from any root (a parent cycle)
    loop {
        if stack.is_empty() {
            let next = pending_roots.next().or_else(|| {
                while scan < n && visited[scan] {
                    scan += 1;
                }
                (scan < n).then_some(scan)
            });
            let Some(root) = next else { break };
            if visited[root] {
                continue;
            }
            let first = out.order.is_empty();
            stack.push(Work::Visit {
                i: root,
                nest: 0,
                branch_start: !first,
            });
        }
        let Some(work) = stack.pop() else { break };
        let (i, nest, branch_start) = match work {
            Work::Emit(step) => {
                out.steps.push(step);
                continue;
            }
            Work::Visit {
                i,
                nest,
                branch_start,
            } => (i, nest, branch_start),
        };
        if visited[i] {
            continue;
        }
        visited[i] = true;
        out.order.push(i);
        out.steps.push(Step::Row { i, branch_start });
        let kids: Vec<usize> = ordered(children(i), &out.on_path)
            .into_iter()
            .filter(|&c| !visited[c])
            .collect();
        match kids.len() {
            0 => {}
            1 => stack.push(Work::Visit {
                i: kids[0],
                nest,
                branch_start: false,
            }),
            _ if nest >= MAX_NEST => {
                for &c in kids.iter().rev() {
                    stack.push(Work::Visit {
                        i: c,
                        nest,
                        branch_start: true,
                    });
                }
            }
            _ => {
                stack.push(Work::Emit(Step::ForkClose));
                for &c in kids.iter().rev() {
                    stack.push(Work::Emit(Step::BranchClose));
                    stack.push(Work::Visit {
                        i: c,
                        nest: nest + 1,
                        branch_start: false,
                    });
                    stack.push(Work::Emit(Step::BranchOpen));
                }
                stack.push(Work::Emit(Step::ForkOpen));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(parents: &[Option<usize>], leaf: usize) -> Layout {
        layout(parents.len(), |i| parents[i], Some(leaf))
    }

    #[test]
    fn current_branch_comes_first() {
        // 0 ─ 1 ─ 2 ─ 3        (older branch)
        //      └─ 4 ─ 5        (current, leaf 5)
        let l = lay(&[None, Some(0), Some(1), Some(2), Some(1), Some(4)], 5);
        assert_eq!(l.order, vec![0, 1, 4, 5, 2, 3]);
        assert_eq!(l.path_len, 4);
        assert!(!l.starts_segment(1) && !l.starts_segment(3));
        assert!(l.starts_segment(4));
        assert!(!l.starts_segment(5));
        assert_eq!(l.branches(), 2);
        use Step::*;
        assert_eq!(
            l.steps,
            vec![
                Row {
                    i: 0,
                    branch_start: false
                },
                Row {
                    i: 1,
                    branch_start: false
                },
                ForkOpen,
                BranchOpen,
                Row {
                    i: 4,
                    branch_start: false
                },
                Row {
                    i: 5,
                    branch_start: false
                },
                BranchClose,
                BranchOpen,
                Row {
                    i: 2,
                    branch_start: false
                },
                Row {
                    i: 3,
                    branch_start: false
                },
                BranchClose,
                ForkClose,
            ]
        );
    }

    #[test]
    fn several_roots_and_children_of_the_leaf() {
        // roots 0 and 2; leaf 1 has a child 3.
        let l = lay(&[None, Some(0), None, Some(1)], 1);
        assert_eq!(l.order, vec![0, 1, 3, 2]);
        assert!(
            l.starts_segment(2),
            "off-path child of the leaf starts a segment"
        );
        assert!(l.starts_segment(3), "another root starts a segment");
    }

    #[test]
    fn cycles_and_broken_links_terminate() {
        // 1 and 2 point at each other; 3 points past the end.
        let l = layout(4, |i| [None, Some(2), Some(1), Some(99)][i], Some(1));
        let mut seen = l.order.clone();
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 1, 2, 3]);
    }

    #[test]
    fn deep_chains_and_wide_nesting_are_bounded() {
        let n = 20_000;
        let l = layout(n, |i| i.checked_sub(1), Some(n - 1));
        assert_eq!(l.order.len(), n);
        assert_eq!(l.path_len, n);
        // A comb: every chain entry forks; nesting stops at MAX_NEST.
        let n = 400;
        let l = layout(
            n,
            |i| {
                if i == 0 {
                    None
                } else if i % 2 == 1 {
                    Some(i.saturating_sub(1))
                } else {
                    Some(i - 2)
                }
            },
            Some(n - 1),
        );
        let depth = l.steps.iter().fold((0i32, 0i32), |(d, max), s| match s {
            Step::ForkOpen => (d + 1, max.max(d + 1)),
            Step::ForkClose => (d - 1, max),
            _ => (d, max),
        });
        assert_eq!(depth.0, 0);
        assert!(depth.1 as usize <= MAX_NEST, "{}", depth.1);
        assert_eq!(l.order.len(), n);
    }
}
