//! What `fgbpf top`'s user chose and what it derives: the side, the mode,
//! the sort, the process or thread narrowed to, the flame's zoom, paused or
//! not; the keys that change them; and the rows of the last refresh, kept
//! so that a key redraws without a new reading.

use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::app::views::Views;
use crate::format::top::{Mode, Screen};
use crate::analysis::top::{self, Line, Narrow, Node, Side, Sort, Task};
use crate::profile::{Losses, Profile, Unit};

/// Refresh intervals `+` and `-` step through, in seconds.
const INTERVALS: [u64; 6] = [1, 2, 5, 10, 30, 60];

/// What a key asks of the loop.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    Nothing,
    Redraw,
    Write,
    Quit,
}

pub struct View {
    pub side: Side,
    pub mode: Mode,
    pub sort: Sort,
    pub interval: Duration,
    pub paused: bool,
    pub narrow: Narrow,
    /// The name the thread table gave what was narrowed to: a thread with
    /// no samples on the side shown (a sleeper, on-CPU) is in no table
    /// read then, and keeps its name.
    narrowed_as: String,
    selected: usize,
    zoom: Vec<usize>,
    highlighted: Vec<usize>,
    pub status: String,
    /// The last reading, named, and the capture's time it reaches.
    pub views: Option<Views>,
    pub through: Duration,
    /// Whether the last reading named both sides (the thread table's).
    both_read: bool,
    lines: Vec<Line>,
    tasks: Vec<Task>,
    flame: Node,
    totals: (u64, u64),
}

impl View {
    pub fn new(side: Side, interval_s: u64) -> View {
        View {
            side,
            mode: Mode::Functions,
            sort: Sort::SelfNow,
            interval: Duration::from_secs(interval_s),
            paused: false,
            narrow: Narrow::All,
            narrowed_as: String::new(),
            selected: 0,
            zoom: Vec::new(),
            highlighted: Vec::new(),
            status: String::new(),
            views: None,
            through: Duration::ZERO,
            both_read: false,
            lines: Vec::new(),
            tasks: Vec::new(),
            flame: Node::default(),
            totals: (0, 0),
        }
    }

    /// Takes a new reading, through `through` of the capture; `both`
    /// when it named both sides.
    pub fn update(&mut self, views: Views, through: Duration, both: bool) {
        self.views = Some(views);
        self.through = through;
        self.both_read = both;
        self.derive();
    }

    /// Whether a reading names both sides: the thread table lists the
    /// threads of either (one that sleeps has no on-CPU sample for
    /// seconds), the other modes show one side.
    pub fn wants_both(&self) -> bool {
        self.mode == Mode::Tasks
    }

    /// Whether the last reading left out what is shown: the side, or in
    /// the thread table the other side.
    pub fn side_missing(&self) -> bool {
        self.views.is_some() && (self.profile().is_none() || (self.wants_both() && !self.both_read))
    }

    /// The shown side's profile of the last reading.
    fn profile(&self) -> Option<&Profile> {
        let views = self.views.as_ref()?;
        match self.side {
            Side::OnCpu => views.on.as_ref(),
            Side::OffCpu => views.off.as_ref(),
        }
    }

    /// The rows, tasks and flame of the last reading as chosen.
    fn derive(&mut self) {
        // The highlighted row stays on its function or task as rows move.
        let task = self.tasks.get(self.selected).map(|t| (t.pid, t.tid));
        let line = self.lines.get(self.selected).map(|l| l.name.clone());
        self.rederive();
        let found = match self.mode {
            Mode::Tasks => task.and_then(|k| self.tasks.iter().position(|t| (t.pid, t.tid) == k)),
            Mode::Functions => line.and_then(|n| self.lines.iter().position(|l| l.name == n)),
            Mode::Flame => None,
        };
        if let Some(i) = found {
            self.selected = i;
        }
    }

    fn rederive(&mut self) {
        let Some(profile) = self.profile() else { return };
        let mut all = profile.clone();
        let mut now = profile.clone();
        let from = self.through.saturating_sub(self.interval).as_secs_f64();
        let (a, b) = now.slices_for(from, Some(self.through.as_secs_f64()));
        now.keep_slices(a, b);
        // The thread table lists everyone (on either side); the rest shows
        // the narrowed.
        let other = self.views.as_ref().and_then(|v| match self.side {
            Side::OnCpu => v.off.as_ref(),
            Side::OffCpu => v.on.as_ref(),
        });
        self.tasks = top::tasks(&now, &all, other);
        self.narrow.apply(&mut all);
        self.narrow.apply(&mut now);
        // Only what the mode shows is computed (set_mode derives again).
        self.lines = match (self.mode, self.side) {
            (Mode::Functions, Side::OnCpu) => top::functions(&now, &all, self.sort),
            (Mode::Functions, Side::OffCpu) => top::waits(&now, &all, self.sort),
            _ => Vec::new(),
        };
        self.flame = match self.mode {
            Mode::Flame => top::flame(&now),
            _ => Node::default(),
        };
        self.totals = (now.total(), all.total());
        if self.mode == Mode::Flame {
            if self.flame.at(&self.highlighted).is_none() {
                self.highlighted = self.zoom.clone();
            }
            if self.flame.at(&self.zoom).is_none() {
                self.zoom.clear();
                self.highlighted.clear();
            }
        }
    }

    /// What a key does.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let rows = match self.mode {
            Mode::Functions => self.lines.len(),
            Mode::Tasks => self.tasks.len(),
            Mode::Flame => 0,
        };
        self.status.clear();
        match key.code {
            KeyCode::Char('c') if ctrl => return Action::Quit,
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('w') => return Action::Write,
            KeyCode::Char('f') => self.set_mode(Mode::Functions),
            KeyCode::Char('t') => self.set_mode(Mode::Tasks),
            KeyCode::Char('g') => self.set_mode(Mode::Flame),
            KeyCode::Char('o') => {
                self.side = match self.side {
                    Side::OnCpu => Side::OffCpu,
                    Side::OffCpu => Side::OnCpu,
                };
                self.selected = 0;
                self.zoom.clear();
                self.highlighted.clear();
                self.derive();
            }
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.derive();
            }
            KeyCode::Char('p') | KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('+') | KeyCode::Char('-') => self.step_interval(key.code == KeyCode::Char('+')),
            KeyCode::Char('a') => {
                self.narrow = Narrow::All;
                self.derive();
            }
            KeyCode::Esc | KeyCode::Backspace if self.mode == Mode::Flame => {
                self.zoom.pop();
                self.highlighted = self.zoom.clone();
            }
            KeyCode::Esc => {
                self.narrow = Narrow::All;
                self.derive();
            }
            KeyCode::Enter => self.enter(),
            KeyCode::Up | KeyCode::Down | KeyCode::Left | KeyCode::Right if self.mode == Mode::Flame => {
                self.move_in_flame(key.code)
            }
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.selected = (self.selected + 1).min(rows.saturating_sub(1)),
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(10),
            KeyCode::PageDown => self.selected = (self.selected + 10).min(rows.saturating_sub(1)),
            _ => return Action::Nothing,
        }
        Action::Redraw
    }

    fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
        self.selected = 0;
        self.derive();
    }

    fn step_interval(&mut self, up: bool) {
        let now = self.interval.as_secs();
        let next = match up {
            true => INTERVALS.iter().find(|&&s| s > now).copied().unwrap_or(now),
            false => INTERVALS.iter().rev().find(|&&s| s < now).copied().unwrap_or(now),
        };
        self.interval = Duration::from_secs(next);
        self.status = format!("refreshing every {next} s");
        self.derive();
    }

    fn enter(&mut self) {
        match self.mode {
            Mode::Tasks => {
                if let Some(t) = self.tasks.get(self.selected) {
                    self.narrow = t.narrow();
                    self.narrowed_as = t.name.clone();
                    self.status = format!("narrowed to {}; a shows all again", self.narrowed().unwrap_or_default());
                    self.mode = Mode::Functions;
                    self.selected = 0;
                    self.derive();
                }
            }
            Mode::Flame => self.zoom = self.highlighted.clone(),
            Mode::Functions => {}
        }
    }

    /// Up: the caller (not above the zoom); Down: the heaviest callee;
    /// Left and Right: the neighbours.
    fn move_in_flame(&mut self, code: KeyCode) {
        let mut path = self.highlighted.clone();
        match code {
            KeyCode::Up if path.len() > self.zoom.len() => {
                path.pop();
            }
            KeyCode::Down => path.push(0),
            KeyCode::Left if path.len() > self.zoom.len() => {
                if let Some(last) = path.last_mut() {
                    *last = last.saturating_sub(1);
                }
            }
            KeyCode::Right if path.len() > self.zoom.len() => {
                if let Some(last) = path.last_mut() {
                    *last += 1;
                }
            }
            _ => {}
        }
        if self.flame.at(&path).is_some() {
            self.highlighted = path;
        }
    }

    /// The process or thread narrowed to, in words.
    pub fn narrowed(&self) -> Option<String> {
        let (pid, tid) = match self.narrow {
            Narrow::All => return None,
            Narrow::Process(p) => (p, None),
            Narrow::Thread(t) => (0, Some(t)),
        };
        let found = self.tasks.iter().find(|t| match tid {
            Some(tid) => t.tid == Some(tid),
            None => t.pid == pid && t.tid.is_none(),
        });
        let name = match found.map_or(self.narrowed_as.as_str(), |t| t.name.as_str()) {
            "" => String::new(),
            name => format!(" ({name})"),
        };
        Some(match tid {
            Some(t) => format!("thread {t}{name}"),
            None => format!("process {pid}{name}"),
        })
    }

    /// The screen of the last reading.
    pub fn screen<'a>(&'a self, target: &'a str, frequency: u64, losses: String) -> Screen<'a> {
        let unit = self.profile().map_or(Unit::Samples, |p| p.unit);
        Screen {
            target,
            side: self.side,
            mode: self.mode,
            sort: self.sort,
            elapsed_s: self.through.as_secs_f64(),
            interval_s: self.interval.as_secs_f64(),
            paused: self.paused,
            narrowed: self.narrowed(),
            unit,
            frequency,
            total_now: self.totals.0,
            total_all: self.totals.1,
            lines: &self.lines,
            tasks: &self.tasks,
            selected: self.selected,
            flame: &self.flame,
            zoom: &self.zoom,
            highlighted: &self.highlighted,
            losses,
            status: &self.status,
        }
    }
}

/// The losses of a reading in one line.
pub fn losses_line(losses: &Losses) -> String {
    let total = losses.total();
    if total == 0 {
        return "nothing lost".into();
    }
    let mut entries = losses.entries.clone();
    entries.sort_by_key(|e| std::cmp::Reverse(e.count));
    let first = &entries[0];
    let more = match entries.len() {
        1 => String::new(),
        n => format!("; {} more kinds in the report (w)", n - 1),
    };
    format!("lost: {} {} ({}){more}", first.count, first.what, first.remedy)
}
