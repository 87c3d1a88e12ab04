//! One stable sort for the cold paths: every call sorts through the same instantiation of the
//! standard library's sort.
//!
//! `slice::sort_by` is generic over the element and the comparison: each call site with its own
//! closure gets its own copy of the whole driftsort (about 6.5 KB of code at opt-level 3).
//! [`sort_by`] sorts the positions `0..n` instead, with the comparison behind a `dyn`, so all of
//! its callers share one copy, and then moves the elements into place (a few hundred bytes per
//! element type). It is stable like `slice::sort_by`; the indirect comparison costs a little,
//! so the hot paths (the tools' listings, the search) keep their own sorts.
//! `docs/architecture.md`, "Binary size".

use std::cmp::Ordering;

/// Sort `v` stably by `cmp`: the same order as `v.sort_by(cmp)`.
pub fn sort_by<T>(v: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    if v.len() < 2 {
        return;
    }
    let order = sorted_positions(v.len(), &mut |a, b| cmp(&v[a], &v[b]));
    permute(v, order);
}

/// Sort `v` stably by the key `f` gives: the same order as `v.sort_by_key(f)`.
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut f: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| f(a).cmp(&f(b)));
}

/// The positions `0..n` in the order `cmp` gives them (stable: equal positions keep their order).
#[inline(never)]
fn sorted_positions(n: usize, cmp: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(a, b));
    order
}

/// Put `v[order[i]]` at `i` for every `i` (`order` a permutation of `0..v.len()`), following
/// each cycle once with swaps.
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    for start in 0..order.len() {
        let mut i = start;
        // `order[i] == i` once position `i` holds its element (marked on the way round).
        while order[i] != start {
            let next = order[i];
            v.swap(i, next);
            order[i] = i;
            i = next;
        }
        order[i] = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_the_same_as_the_standard_sort() {
        // Pairs sorted by their first half only: the second half shows stability.
        let mut seed = 12345u32;
        for n in [0usize, 1, 2, 3, 7, 20, 33, 100, 257] {
            let v: Vec<(u32, usize)> = (0..n)
                .map(|i| {
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    ((seed >> 16) % 5, i)
                })
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|a| a.0);
            let mut got = v.clone();
            sort_by(&mut got, |a, b| a.0.cmp(&b.0));
            assert_eq!(got, want, "n {n}");
            let mut got = v.clone();
            sort_by_key(&mut got, |p| std::cmp::Reverse(p.0));
            let mut want = v.clone();
            want.sort_by_key(|p| std::cmp::Reverse(p.0));
            assert_eq!(got, want, "n {n}");
        }
    }

    #[test]
    fn moves_owned_elements() {
        let mut v: Vec<String> = ["d", "b", "a", "c", "b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sort_by(&mut v, |a, b| a.cmp(b));
        assert_eq!(v, ["a", "b", "b", "c", "d"]);
    }
}
