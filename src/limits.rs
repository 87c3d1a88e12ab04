//! Run limits (issue 27): how many LLM requests, tool calls, dollars, milliseconds and identical
//! tool calls in a row one prompt's run may use. Pure: the machine counts through [`Tally`] and
//! asks it at three points (before a call starts, before a turn after the first, when the
//! deadline timer fires); what happens then (no new request, the stream or tools aborted as by
//! `abort`, one `run_limit_reached` event before `agent_end`) is `core/agent.rs`'s.
//!
//! The limits come from settings `pith.limits`, then the flags, then a prompt's `limits` object
//! (each key overrides the one before it). No limit set: no [`Tally`], no event, no field.

use serde_json::{Map, Value};

/// The limits of one run (all optional).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    /// LLM requests in one run (at least 1).
    pub max_turns: Option<u64>,
    /// Tool calls started in one run (0 = none).
    pub max_tool_calls: Option<u64>,
    /// Cost of the run in US dollars, from each reply's usage and the model's prices.
    pub max_cost_usd: Option<f64>,
    /// Wall clock of the run in milliseconds (at least 1).
    pub deadline_ms: Option<u64>,
    /// The same tool with the same arguments this many times in a row (at least 1) ends the run.
    pub max_repeats: Option<u64>,
}

/// Which limit ended a run, with the names of the RPC shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MaxTurns,
    MaxToolCalls,
    MaxCostUsd,
    Deadline,
    MaxRepeats,
}

impl Kind {
    /// The `limit` of `run_limit_reached`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::MaxTurns => "maxTurns",
            Kind::MaxToolCalls => "maxToolCalls",
            Kind::MaxCostUsd => "maxCostUsd",
            Kind::Deadline => "deadline",
            Kind::MaxRepeats => "maxRepeats",
        }
    }

    /// The result record's `subtype` for a run this limit ended.
    pub fn subtype(self) -> &'static str {
        match self {
            Kind::MaxTurns => "max_turns",
            Kind::MaxToolCalls => "max_tool_calls",
            Kind::MaxCostUsd => "max_cost",
            Kind::Deadline => "deadline",
            Kind::MaxRepeats => "max_repeats",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        [
            Kind::MaxTurns,
            Kind::MaxToolCalls,
            Kind::MaxCostUsd,
            Kind::Deadline,
            Kind::MaxRepeats,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// A limit that ended (or is ending) the run: its kind, the limit and what was used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reached {
    pub kind: Kind,
    pub value: f64,
    pub used: f64,
}

/// How the result of a call a limit kept from running starts.
pub const REFUSED: &str = "Tool call not run: the run's ";

/// The keys of a `limits` object, in the order the docs list them.
pub const KEYS: [&str; 5] = [
    "maxTurns",
    "maxToolCalls",
    "maxCostUsd",
    "deadlineMs",
    "maxRepeats",
];

impl Limits {
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// Each limit `over` sets replaces this one's.
    pub fn overridden_by(self, over: &Limits) -> Limits {
        Limits {
            max_turns: over.max_turns.or(self.max_turns),
            max_tool_calls: over.max_tool_calls.or(self.max_tool_calls),
            max_cost_usd: over.max_cost_usd.or(self.max_cost_usd),
            deadline_ms: over.deadline_ms.or(self.deadline_ms),
            max_repeats: over.max_repeats.or(self.max_repeats),
        }
    }

    /// A `limits` object (a prompt's, or settings `pith.limits`): the keys of [`KEYS`], each a
    /// number or `null` (unset). Anything else is an error naming the key, so a typo is not a
    /// limit silently missing.
    pub fn from_json(v: &Value) -> Result<Limits, String> {
        let obj: &Map<String, Value> = v
            .as_object()
            .ok_or_else(|| "expected an object".to_string())?;
        let mut l = Limits::default();
        for (k, v) in obj {
            if v.is_null() {
                continue;
            }
            let count = |min: u64| -> Result<u64, String> {
                v.as_u64()
                    .filter(|n| *n >= min)
                    .ok_or_else(|| format!("\"{k}\" must be an integer of at least {min}"))
            };
            match k.as_str() {
                "maxTurns" => l.max_turns = Some(count(1)?),
                "maxToolCalls" => l.max_tool_calls = Some(count(0)?),
                "maxCostUsd" => {
                    l.max_cost_usd = Some(
                        v.as_f64()
                            .filter(|c| c.is_finite() && *c >= 0.0)
                            .ok_or_else(|| format!("\"{k}\" must be a number of at least 0"))?,
                    )
                }
                "deadlineMs" => l.deadline_ms = Some(count(1)?),
                "maxRepeats" => l.max_repeats = Some(count(1)?),
                other => {
                    return Err(format!(
                        "unknown key \"{other}\" (expected {})",
                        KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(l)
    }
}

/// What one run has used, against its limits.
#[derive(Debug)]
pub struct Tally {
    pub limits: Limits,
    pub turns: u64,
    pub tool_calls: u64,
    pub cost_usd: f64,
    /// Tokens of the run's replies (`usage.totalTokens`), for heartbeats.
    pub tokens: u64,
    /// The last call's tool and arguments, and how many times in a row it came.
    last_call: Option<(String, Value)>,
    repeats: u64,
    /// The limit that ended the run, once one has.
    pub reached: Option<Reached>,
    /// `run_limit_reached` was emitted.
    pub announced: bool,
}

impl Tally {
    pub fn new(limits: Limits) -> Tally {
        Tally {
            limits,
            turns: 0,
            tool_calls: 0,
            cost_usd: 0.0,
            tokens: 0,
            last_call: None,
            repeats: 0,
            reached: None,
            announced: false,
        }
    }

    /// An LLM request started.
    pub fn count_turn(&mut self) {
        self.turns += 1;
    }

    /// A reply ended with this many tokens and this cost (dollars).
    pub fn add_usage(&mut self, tokens: u64, usd: f64) {
        self.tokens = self.tokens.saturating_add(tokens);
        self.add_cost(usd);
    }

    /// A reply ended with this cost (dollars).
    pub fn add_cost(&mut self, usd: f64) {
        if usd.is_finite() && usd > 0.0 {
            self.cost_usd += usd;
        }
    }

    fn reach(&mut self, kind: Kind, value: f64, used: f64) -> Reached {
        *self.reached.get_or_insert(Reached { kind, value, used })
    }

    /// Before another turn would start a request: the limit that forbids it, if any (recorded
    /// as the one that ended the run).
    pub fn before_turn(&mut self) -> Option<Reached> {
        if let Some(r) = self.reached {
            return Some(r);
        }
        if let Some(max) = self.limits.max_turns.filter(|m| self.turns >= *m) {
            return Some(self.reach(Kind::MaxTurns, max as f64, self.turns as f64));
        }
        if let Some(max) = self.limits.max_cost_usd.filter(|m| self.cost_usd >= *m) {
            return Some(self.reach(Kind::MaxCostUsd, max, self.cost_usd));
        }
        None
    }

    /// Before a tool call starts: `Err` if a limit forbids it (it does not run, nor do the calls
    /// after it: the run ends once the calls already started have). `Ok` counts it.
    pub fn before_call(&mut self, name: &str, args: &Value) -> Result<(), Reached> {
        if let Some(r) = self.reached {
            return Err(r);
        }
        let same = self
            .last_call
            .as_ref()
            .is_some_and(|(n, a)| n == name && a == args);
        self.repeats = if same { self.repeats + 1 } else { 1 };
        if !same {
            self.last_call = Some((name.to_string(), args.clone()));
        }
        if let Some(max) = self.limits.max_repeats.filter(|m| self.repeats >= *m) {
            return Err(self.reach(Kind::MaxRepeats, max as f64, self.repeats as f64));
        }
        if let Some(max) = self.limits.max_tool_calls.filter(|m| self.tool_calls >= *m) {
            return Err(self.reach(Kind::MaxToolCalls, max as f64, self.tool_calls as f64));
        }
        self.tool_calls += 1;
        Ok(())
    }

    /// The deadline passed after `elapsed_ms`.
    pub fn deadline_passed(&mut self, elapsed_ms: u64) -> Reached {
        let max = self.limits.deadline_ms.unwrap_or(elapsed_ms);
        self.reach(Kind::Deadline, max as f64, elapsed_ms as f64)
    }

    /// What a call a limit kept from running gets as its (error) result.
    pub fn refusal(r: &Reached) -> String {
        format!("{REFUSED}{} limit ({}) was reached", r.kind.name(), r.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_overrides() {
        let l = Limits::from_json(&json!({"maxTurns":3,"maxToolCalls":0,"maxCostUsd":0.5,
            "deadlineMs":600000,"maxRepeats":2}))
        .unwrap();
        assert_eq!(l.max_turns, Some(3));
        assert_eq!(l.max_tool_calls, Some(0));
        assert_eq!(l.max_cost_usd, Some(0.5));
        assert_eq!(l.deadline_ms, Some(600000));
        assert_eq!(l.max_repeats, Some(2));
        assert!(Limits::from_json(&json!({})).unwrap().is_empty());
        assert!(
            Limits::from_json(&json!({"maxTurns": null}))
                .unwrap()
                .is_empty()
        );
        let base = Limits {
            max_turns: Some(9),
            max_tool_calls: Some(4),
            ..Limits::default()
        };
        let over = Limits {
            max_turns: Some(2),
            ..Limits::default()
        };
        let m = base.overridden_by(&over);
        assert_eq!((m.max_turns, m.max_tool_calls), (Some(2), Some(4)));
    }

    #[test]
    fn rejects_bad_values() {
        for (v, msg) in [
            (
                json!({"maxTurns":0}),
                "\"maxTurns\" must be an integer of at least 1",
            ),
            (
                json!({"maxTurns":1.5}),
                "\"maxTurns\" must be an integer of at least 1",
            ),
            (
                json!({"maxToolCalls":-1}),
                "\"maxToolCalls\" must be an integer of at least 0",
            ),
            (
                json!({"maxCostUsd":"1"}),
                "\"maxCostUsd\" must be a number of at least 0",
            ),
            (
                json!({"deadlineMs":0}),
                "\"deadlineMs\" must be an integer of at least 1",
            ),
            (
                json!({"maxTurn":1}),
                "unknown key \"maxTurn\" (expected maxTurns, maxToolCalls, maxCostUsd, deadlineMs, maxRepeats)",
            ),
            (json!([1]), "expected an object"),
        ] {
            assert_eq!(Limits::from_json(&v).unwrap_err(), msg);
        }
    }

    #[test]
    fn turns_and_cost() {
        let mut t = Tally::new(Limits {
            max_turns: Some(2),
            max_cost_usd: Some(0.01),
            ..Limits::default()
        });
        t.count_turn();
        t.add_cost(0.004);
        assert_eq!(t.before_turn(), None);
        t.count_turn();
        t.add_cost(0.004);
        let r = t.before_turn().unwrap();
        assert_eq!((r.kind, r.value, r.used), (Kind::MaxTurns, 2.0, 2.0));
        // The first limit reached is the one reported.
        t.add_cost(1.0);
        assert_eq!(t.before_turn().unwrap().kind, Kind::MaxTurns);
        let mut c = Tally::new(Limits {
            max_cost_usd: Some(0.01),
            ..Limits::default()
        });
        c.add_cost(0.006);
        assert_eq!(c.before_turn(), None);
        c.add_cost(0.006);
        let r = c.before_turn().unwrap();
        assert_eq!(r.kind, Kind::MaxCostUsd);
        assert!((r.used - 0.012).abs() < 1e-12);
        c.add_cost(f64::NAN);
        assert!((c.cost_usd - 0.012).abs() < 1e-12);
    }

    #[test]
    fn exactly_n_tool_calls() {
        let mut t = Tally::new(Limits {
            max_tool_calls: Some(2),
            ..Limits::default()
        });
        assert!(t.before_call("ls", &json!({"p":1})).is_ok());
        assert!(t.before_call("ls", &json!({"p":2})).is_ok());
        let r = t.before_call("ls", &json!({"p":3})).unwrap_err();
        assert_eq!((r.kind, r.value, r.used), (Kind::MaxToolCalls, 2.0, 2.0));
        assert_eq!(t.tool_calls, 2);
        // Every call after it is refused too, with the same reason.
        assert_eq!(t.before_call("read", &json!({})).unwrap_err(), r);
        assert_eq!(t.before_turn(), Some(r));
        let mut none = Tally::new(Limits {
            max_tool_calls: Some(0),
            ..Limits::default()
        });
        assert!(none.before_call("ls", &json!({})).is_err());
    }

    #[test]
    fn the_nth_repeat_ends_the_run() {
        let mut t = Tally::new(Limits {
            max_repeats: Some(3),
            ..Limits::default()
        });
        let a = json!({"command":"ls"});
        assert!(t.before_call("bash", &a).is_ok());
        assert!(t.before_call("bash", &a).is_ok());
        // Another call in between starts the count again.
        assert!(t.before_call("bash", &json!({"command":"pwd"})).is_ok());
        assert!(t.before_call("bash", &a).is_ok());
        assert!(t.before_call("bash", &a).is_ok());
        let r = t.before_call("bash", &a).unwrap_err();
        assert_eq!((r.kind, r.value, r.used), (Kind::MaxRepeats, 3.0, 3.0));
        assert_eq!(t.tool_calls, 5);
        // The same arguments under another tool are not a repeat.
        let mut u = Tally::new(Limits {
            max_repeats: Some(2),
            ..Limits::default()
        });
        assert!(u.before_call("read", &a).is_ok());
        assert!(u.before_call("bash", &a).is_ok());
        assert!(u.before_call("bash", &a).is_err());
    }

    #[test]
    fn deadline() {
        let mut t = Tally::new(Limits {
            deadline_ms: Some(50),
            ..Limits::default()
        });
        let r = t.deadline_passed(51);
        assert_eq!((r.kind, r.value, r.used), (Kind::Deadline, 50.0, 51.0));
        assert_eq!(t.before_turn(), Some(r));
        assert_eq!(Kind::from_name("deadline"), Some(Kind::Deadline));
        assert_eq!(Kind::MaxCostUsd.subtype(), "max_cost");
    }
}
