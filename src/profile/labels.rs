//! What a stack ran under besides its thread: the id of the task a runtime
//! ran it in ([`super::Meta::id_labels`]) and the labels the program gave
//! that work. pprof output carries them as labels; every other view drops
//! them (they would list a stack once per task) unless they are asked for
//! as a frame.

use super::{Frame, FrameKind, Profile};

/// (key, value) pairs sorted by key. Untrusted text from the target.
pub type Labels = std::sync::Arc<[(String, String)]>;

/// A stack's labels as the text of a frame: `[goroutine 18 route=/api]`,
/// a task's id (its key one of `id_labels`) as `key id`.
pub fn frame_text(labels: &[(String, String)], id_labels: &[&str]) -> String {
    let parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| if id_labels.contains(&k.as_str()) { format!("{k} {v}") } else { format!("{k}={v}") })
        .collect();
    format!("[{}]", parts.join(" "))
}

impl Profile {
    /// Whether any stack carries labels.
    pub fn has_labels(&self) -> bool {
        self.stacks.iter().any(|s| s.labels.is_some())
    }

    /// Drops the stacks' labels, merging the stacks they told apart.
    pub fn drop_labels(&mut self) {
        if self.has_labels() {
            for s in &mut self.stacks {
                s.labels = None;
            }
            self.coalesce();
        }
    }

    /// Roots each stack that has labels at a frame of them (`fgbpf
    /// --label-frames`), below its thread's frames.
    pub fn labels_as_frames(&mut self) {
        let mut stacks = std::mem::take(&mut self.stacks);
        for s in &mut stacks {
            let Some(labels) = &s.labels else { continue };
            let id = self.intern_frame(Frame::new(frame_text(labels, &self.meta.id_labels), FrameKind::Pseudo));
            s.frames = std::iter::once(id).chain(s.frames.iter().copied()).collect();
        }
        self.stacks = stacks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Stack, Unit};

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn stacks_told_apart_by_labels_alone_are_merged_when_they_are_dropped() {
        let mut p = Profile::new(Unit::Samples);
        p.meta.id_labels = vec!["task"];
        let f = p.intern_frame(Frame::new("main.burn", FrameKind::User));
        for (id, w) in [("18", 3), ("19", 4)] {
            p.push(Stack {
                frames: [f].into(),
                weight: w,
                labels: Some(labels(&[("route", "/api"), ("task", id)])),
                ..Default::default()
            });
        }
        p.coalesce();
        assert_eq!(p.stacks().len(), 2);
        let mut framed = p.clone();
        framed.labels_as_frames();
        framed.drop_labels();
        let texts: Vec<&str> = framed.stacks().iter().map(|s| framed.frame(s.frames[0]).name.as_str()).collect();
        assert_eq!(texts.len(), 2);
        assert!(texts.contains(&"[route=/api task 19]"), "{texts:?}");
        p.drop_labels();
        assert_eq!(p.stacks().len(), 1);
        assert_eq!(p.stacks()[0].weight, 7);
    }
}
