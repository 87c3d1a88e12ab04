//! The session-reading and queue commands pi added after 0.73.1, answered in both protocol
//! versions (commands are the union): `get_entries {since?}`, `get_tree`, `clear_queue`,
//! `get_available_thinking_levels`.
//!
//! `get_entries` and `get_tree` splice each entry's stored line (already in `JSON.stringify`
//! form) into the response instead of building values, and the tree is written with an explicit
//! stack: a session is often one long chain, as deep as it has entries.

use serde_json::{Value, json};

use crate::core::machine::Machine;
use crate::session::{EntryKind, Session};

/// `{"entries":[…],"leafId":…}`: the entries after `since` (all without it) in file order.
pub fn entries_json(session: &Session, since: Option<&str>) -> Result<Vec<u8>, String> {
    let entries = session.entries();
    let start = match since {
        None => 0,
        Some(id) => match entries.iter().position(|e| e.id() == id) {
            Some(i) => i + 1,
            None => return Err(format!("Entry not found: {id}")),
        },
    };
    let size: usize = entries[start..].iter().map(|e| e.line().len() + 1).sum();
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(b"{\"entries\":[");
    for (n, e) in entries[start..].iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(e.line().as_bytes());
    }
    out.extend_from_slice(b"],\"leafId\":");
    put_leaf(&mut out, session);
    out.push(b'}');
    Ok(out)
}

fn put_leaf(out: &mut Vec<u8>, session: &Session) {
    let leaf = session.leaf_id().map_or(Value::Null, |l| json!(l));
    let _ = crate::rpc::response::write_js(out, &leaf);
}

/// `{"tree":[{"entry","children":[…],"label"?,"labelTimestamp"?}…],"leafId":…}` as pi's
/// `getTree`: an entry whose parent is missing (or itself) is a root; children are ordered by
/// timestamp (stable).
pub fn tree_json(session: &Session) -> Vec<u8> {
    let entries = session.entries();
    let n = entries.len();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots: Vec<usize> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match session.parent_index(i) {
            Some(p) if e.parent_id() != Some(e.id()) && p != i => children[p].push(i),
            _ => roots.push(i),
        }
    }
    for c in &mut children {
        crate::sort::sort_by_key(c, |&i| entries[i].timestamp_ms());
    }
    // Labels as pi resolves them: the last label entry per target, cleared by an empty one.
    let mut labels: std::collections::HashMap<&str, (&str, &str)> = Default::default();
    for e in entries {
        if let EntryKind::Label { target_id, label } = e.kind() {
            let ts = e
                .raw()
                .get("timestamp")
                .and_then(Value::as_str)
                .unwrap_or("");
            match label.as_deref().filter(|l| !l.is_empty()) {
                Some(l) => {
                    labels.insert(target_id.as_str(), (l, ts));
                }
                None => {
                    labels.remove(target_id.as_str());
                }
            }
        }
    }
    let size: usize = entries.iter().map(|e| e.line().len() + 32).sum();
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(b"{\"tree\":[");
    // Each frame: the node and how many of its children are written.
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for (r, &root) in roots.iter().enumerate() {
        if r > 0 {
            out.push(b',');
        }
        open_node(&mut out, &entries[root].line());
        stack.push((root, 0));
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            if let Some(&child) = children[node].get(*next) {
                if *next > 0 {
                    out.push(b',');
                }
                *next += 1;
                open_node(&mut out, &entries[child].line());
                stack.push((child, 0));
            } else {
                out.push(b']');
                if let Some((label, ts)) = labels.get(entries[node].id()) {
                    out.extend_from_slice(b",\"label\":");
                    let _ = crate::rpc::response::write_js(&mut out, label);
                    out.extend_from_slice(b",\"labelTimestamp\":");
                    let _ = crate::rpc::response::write_js(&mut out, ts);
                }
                out.push(b'}');
                stack.pop();
            }
        }
    }
    out.extend_from_slice(b"],\"leafId\":");
    put_leaf(&mut out, session);
    out.push(b'}');
    out
}

fn open_node(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(b"{\"entry\":");
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b",\"children\":[");
}

impl Machine {
    /// `get_entries`: answered here (the data is spliced, not built as a value).
    pub(crate) fn cmd_get_entries(&mut self, id: Option<&Value>, since: Option<&str>) {
        let line = match entries_json(&self.state.session, since) {
            Ok(data) => crate::rpc::response::success_raw(id, "get_entries", &data),
            Err(e) => crate::rpc::response::error(id, Some("get_entries"), &e),
        };
        self.send(line);
    }

    pub(crate) fn cmd_get_tree(&mut self, id: Option<&Value>) {
        let data = tree_json(&self.state.session);
        let line = crate::rpc::response::success_raw(id, "get_tree", &data);
        self.send(line);
    }

    /// `get_session_stats`: pi 0.73.1 counts the context, pi 0.87.1 the whole session file (with
    /// the summaries' usage) and estimates the context through its projection.
    pub(crate) fn session_stats(&self) -> Value {
        let window = self.state.model.as_ref().map(|m| m.context_window);
        let scope = self.profile.answers.session_stats;
        let mut stats = self
            .state
            .session
            .stats_for(self.state.messages.as_slice(), window, scope);
        if scope == crate::protocol::SessionStats::SessionFile {
            let path = self.state.session.branch_path();
            let projected = crate::session::projection::project(&path);
            stats.context_usage =
                crate::session::projection::context_usage(&projected, &path, window);
        }
        serde_json::to_value(stats).unwrap_or(Value::Null)
    }

    /// `clear_queue`: both queues emptied (`queue_update`, always), their texts answered.
    pub(crate) fn cmd_clear_queue(&mut self) -> Value {
        let steering = self.queues.steering.texts();
        let follow_up = self.queues.follow_up.texts();
        self.queues.steering.clear();
        self.queues.follow_up.clear();
        self.emit_queue_update();
        json!({ "steering": steering, "followUp": follow_up })
    }

    /// `get_available_thinking_levels`: the current model's levels (`["off"]` without reasoning
    /// or without a model).
    pub(crate) fn available_thinking_levels(&self) -> Value {
        let levels: Vec<&str> = match &self.state.model {
            Some(m) => self
                .env
                .registry
                .thinking_levels(m)
                .iter()
                .map(|l| l.as_str())
                .collect(),
            None => vec!["off"],
        };
        json!({ "levels": levels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_with_branch() -> Session {
        let mut s = Session::new("/w", None, None);
        let a = s.append_model_change("p", "m");
        let b = s.append_thinking_level_change(crate::message::ThinkingLevel::Off);
        s.branch(&a).unwrap();
        let c = s.append_session_info("named");
        s.append_label(&b, Some("here")).unwrap();
        let _ = c;
        s
    }

    #[test]
    fn entries_since_and_unknown_since() {
        let s = session_with_branch();
        let all: Value = serde_json::from_slice(&entries_json(&s, None).unwrap()).unwrap();
        assert_eq!(all["entries"].as_array().unwrap().len(), 4);
        assert_eq!(all["leafId"], all["entries"][3]["id"]);
        let first = all["entries"][0]["id"].as_str().unwrap().to_string();
        let rest: Value = serde_json::from_slice(&entries_json(&s, Some(&first)).unwrap()).unwrap();
        assert_eq!(rest["entries"].as_array().unwrap().len(), 3);
        assert_eq!(
            entries_json(&s, Some("nope1234")).unwrap_err(),
            "Entry not found: nope1234"
        );
    }

    #[test]
    fn tree_with_two_branches_and_a_label() {
        let s = session_with_branch();
        let t: Value = serde_json::from_slice(&tree_json(&s)).unwrap();
        let roots = t["tree"].as_array().unwrap();
        assert_eq!(roots.len(), 1);
        let kids = roots[0]["children"].as_array().unwrap();
        assert_eq!(kids.len(), 2);
        assert_eq!(kids[0]["entry"]["type"], "thinking_level_change");
        assert_eq!(kids[0]["label"], "here");
        assert!(kids[0]["labelTimestamp"].is_string());
        assert!(kids[1].get("label").is_none());
        assert_eq!(kids[1]["children"][0]["entry"]["type"], "label");
    }

    #[test]
    fn a_deep_chain_does_not_recurse() {
        let mut s = Session::new("/w", None, None);
        for i in 0..50_000 {
            s.append_session_info(&format!("n{i}"));
        }
        let t: Vec<u8> = tree_json(&s);
        assert!(t.starts_with(b"{\"tree\":[{\"entry\":"));
        assert!(t.ends_with(b"}"));
    }
}
