//! `fgbpf top` on a terminal, drawn with ratatui: a header, the keys, the
//! table or flame of the chosen mode, and a status line. Fits 80x24 and
//! reads without colour: the highlighted row and frame are in reverse
//! video, flame frames are bracketed by `|`.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line as TextLine, Text};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::{share, Mode, Screen};
use crate::analysis::top::{Node, Side};

/// The keys, as the second line shows them.
pub const KEYS: &str =
    "q quit  f functions  t threads  g flame  o on/off-CPU  s sort  p pause  +/- interval  w write";

pub fn draw(frame: &mut Frame, screen: &Screen) {
    let [header, keys, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let bold = Style::default().add_modifier(Modifier::BOLD);
    frame.render_widget(Paragraph::new(screen.header()).style(bold), header);
    let keys_text = match screen.mode {
        Mode::Flame => "q quit  arrows move  Enter zoom  Backspace out  f functions  t threads  o on/off-CPU  p pause  w write",
        Mode::Tasks => "q quit  Up/Down move  Enter narrow to it  a all  f functions  g flame  o on/off-CPU  w write",
        Mode::Functions => KEYS,
    };
    frame.render_widget(Paragraph::new(keys_text), keys);
    match screen.mode {
        Mode::Functions => functions(frame, body, screen),
        Mode::Tasks => tasks(frame, body, screen),
        Mode::Flame => flame(frame.buffer_mut(), body, screen),
    }
    let line = match screen.status.is_empty() {
        true => screen.losses.clone(),
        false => format!("{} | {}", screen.status, screen.losses),
    };
    frame.render_widget(Paragraph::new(line), status);
}

fn functions(frame: &mut Frame, area: Rect, screen: &Screen) {
    let what = match screen.side {
        Side::OnCpu => "Function",
        Side::OffCpu => "Wait [state]",
    };
    let interval = format!("{:.0} s", screen.interval_s);
    let tops = [interval.as_str(), interval.as_str(), "all", "all", "all", "all"];
    let names = ["%Self", "%Total", "%Self", "%Total", "Self", "Total"];
    let mut cells: Vec<Cell> = tops
        .iter()
        .zip(names)
        .map(|(top, name)| Cell::from(Text::from(vec![TextLine::from(*top), TextLine::from(name)]).right_aligned()))
        .collect();
    let sorted = format!("sorted by {}", screen.sort.name());
    cells.push(Cell::from(Text::from(vec![TextLine::from(sorted), TextLine::from(what)])));
    let header = Row::new(cells)
        .height(2)
        .style(Style::default().add_modifier(Modifier::BOLD));
    // Only the rows the screen has room for are made: a whole host has
    // thousands of functions.
    let (start, shown) = window(area, 2, screen.selected, screen.lines.len());
    let rows = screen.lines[start..start + shown].iter().map(|l| {
        Row::new(vec![
            format!("{:5.1}", share(l.self_now, screen.total_now)),
            format!("{:6.1}", share(l.total_now, screen.total_now)),
            format!("{:5.1}", share(l.self_all, screen.total_all)),
            format!("{:6.1}", share(l.total_all, screen.total_all)),
            format!("{:7.2}s", screen.seconds(l.self_all)),
            format!("{:7.2}s", screen.seconds(l.total_all)),
            l.name.clone(),
        ])
    });
    let widths = [
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Min(10),
    ];
    table(frame, area, header, rows.collect(), &widths, screen.selected.saturating_sub(start));
}

/// The rows `start..start + shown` of `len` that fit under a header of
/// `header` lines, with `selected` among them.
fn window(area: Rect, header: u16, selected: usize, len: usize) -> (usize, usize) {
    let room = area.height.saturating_sub(header).max(1) as usize;
    let selected = selected.min(len.saturating_sub(1));
    let start = (selected + 1).saturating_sub(room);
    (start, room.min(len - start.min(len)))
}

fn tasks(frame: &mut Frame, area: Rect, screen: &Screen) {
    let unit = match screen.side {
        Side::OnCpu => "on-CPU",
        Side::OffCpu => "off-CPU",
    };
    let header = Row::new(vec![
        "PID".to_string(),
        "TID".to_string(),
        format!("%{unit} now"),
        "since start".to_string(),
        "Process / thread (Enter narrows every view to it)".to_string(),
    ])
    .style(Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    let (start, shown) = window(area, 1, screen.selected, screen.tasks.len());
    let rows = screen.tasks[start..start + shown].iter().map(|t| {
        Row::new(vec![
            t.pid.to_string(),
            t.tid.map_or_else(String::new, |t| t.to_string()),
            format!("{:5.1}", share(t.now, screen.total_now)),
            format!("{:8.2}s", screen.seconds(t.all)),
            match t.tid {
                Some(_) => format!("  {}", t.name),
                None => t.name.clone(),
            },
        ])
    });
    let widths = [
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(11),
        Constraint::Min(10),
    ];
    table(frame, area, header, rows.collect(), &widths, screen.selected.saturating_sub(start));
}

fn table(frame: &mut Frame, area: Rect, header: Row, rows: Vec<Row>, widths: &[Constraint], selected: usize) {
    let mut state = TableState::default();
    if !rows.is_empty() {
        state.select(Some(selected.min(rows.len() - 1)));
    }
    let t = Table::new(rows, widths.to_vec())
        .header(header)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    frame.render_stateful_widget(t, area, &mut state);
}

/// The flame of the interval, root at the top (an icicle, as the terminal
/// reads top-down), from the frame zoomed into; each frame as wide as its
/// weight, the highlighted one in reverse video and named in full below.
fn flame(buf: &mut Buffer, area: Rect, screen: &Screen) {
    if area.height < 2 || area.width < 10 {
        return;
    }
    let Some(top) = screen.flame.at(screen.zoom) else { return };
    let rows = area.height - 1;
    let mut path = screen.zoom.to_vec();
    draw_level(buf, area, screen, top, (area.x, area.width), 0, rows, &mut path);
    let named = screen.flame.at(screen.highlighted).unwrap_or(top);
    let line = format!(
        "{}: {:.1}% of the view, {:.2} s",
        named.name,
        share(named.weight, screen.flame.weight),
        screen.seconds(named.weight)
    );
    buf.set_line(area.x, area.y + rows, &TextLine::from(line), area.width);
}

#[allow(clippy::too_many_arguments)]
fn draw_level(
    buf: &mut Buffer,
    area: Rect,
    screen: &Screen,
    node: &Node,
    (x, width): (u16, u16),
    depth: u16,
    rows: u16,
    path: &mut Vec<usize>,
) {
    if depth >= rows || width == 0 {
        return;
    }
    let highlighted = path.as_slice() == screen.highlighted;
    let mut style = Style::default();
    if highlighted {
        style = style.add_modifier(Modifier::REVERSED);
    }
    let mut text: String = String::from("|");
    text.extend(node.name.chars().take(width.saturating_sub(1) as usize));
    let text: String = format!("{text:<w$}", w = width as usize).chars().take(width as usize).collect();
    buf.set_string(x, area.y + depth, &text, style);
    if node.weight == 0 {
        return;
    }
    // Children laid out by their cumulative weight, so that rounding never
    // makes the row wider than the parent.
    let mut below = 0u64;
    for (i, child) in node.children.iter().enumerate() {
        let from = (below as u128 * width as u128 / node.weight as u128) as u16;
        below += child.weight;
        let to = (below as u128 * width as u128 / node.weight as u128) as u16;
        if to > from {
            path.push(i);
            draw_level(buf, area, screen, child, (x + from, to - from), depth + 1, rows, path);
            path.pop();
        }
    }
}
