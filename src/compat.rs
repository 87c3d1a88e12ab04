//! Which pi protocol version pith speaks: `--compat 0.73` (default, the seeds' protocol, pi
//! 0.73.1) or `--compat 0.87` (pi 0.87.1). Commands are the union in both; what pith *emits*
//! (events, response shapes, session entries, texts) follows the selected version exactly.
//! Chosen by `--compat` or settings `pith.compat` (the flag wins).

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Compat {
    /// pi 0.73.1: the protocol of the seeds and the shared scenarios.
    #[default]
    V073,
    /// pi 0.87.1: today's pi.
    V087,
}

impl Compat {
    /// `0.73`, `0.73.1`, `0.87`, `0.87.1` (also with a leading `v`).
    pub fn parse(s: &str) -> Option<Compat> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        match s {
            "0.73" | "0.73.1" => Some(Compat::V073),
            "0.87" | "0.87.1" => Some(Compat::V087),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Compat::V073 => "0.73",
            Compat::V087 => "0.87",
        }
    }

    /// True when pith emits pi 0.87.1's shapes.
    pub fn is_087(self) -> bool {
        self == Compat::V087
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(Compat::parse("0.73"), Some(Compat::V073));
        assert_eq!(Compat::parse("0.87.1"), Some(Compat::V087));
        assert_eq!(Compat::parse("v0.87"), Some(Compat::V087));
        assert_eq!(Compat::parse("0.80"), None);
        assert_eq!(Compat::default(), Compat::V073);
        assert!(Compat::V087.is_087() && !Compat::V073.is_087());
    }
}
