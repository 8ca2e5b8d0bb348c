//! What a capture could not keep: the samples or time it lost, counted by
//! cause, each with the option that raises the limit it ran into (carried
//! in [`super::Meta::losses`], printed by the outputs beside the stacks).

/// Samples or time that the capture could not keep, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// (what was lost, how many, the option that raises the limit)
    pub entries: Vec<Loss>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    pub what: String,
    pub count: u64,
    pub remedy: String,
}

impl Losses {
    pub fn add(&mut self, what: &str, count: u64, remedy: &str) {
        if count > 0 {
            self.entries.push(Loss {
                what: what.into(),
                count,
                remedy: remedy.into(),
            });
        }
    }

    pub fn total(&self) -> u64 {
        self.entries.iter().map(|l| l.count).sum()
    }
}
