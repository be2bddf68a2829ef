//! What opens over the body: help, the filter prompt, the detail pane and the confirmations.

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::*;

use super::*;

/// A rectangle of `width` × `height` centred in `area`, shrunk to fit.
pub(super) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

pub(super) fn draw_popup(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    text: Text<'static>,
    theme: Theme,
) {
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text)
            .block(block(title, theme))
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// The help overlay over `area`, from line `scroll` on: as tall as it needs and the screen
/// allows; what does not fit scrolls, and the title says where it is.
/// A dialog that asks before it changes something: `lines` wrap to the dialog's width, which
/// grows the dialog (as far as `body` allows), and `keys` ([`confirm_keys`]) is drawn on the last
/// row inside the border whatever the wrapping did, so the answer keys are never cut off.
pub(super) fn draw_dialog(
    frame: &mut Frame,
    body: Rect,
    title: &str,
    lines: Vec<Line<'static>>,
    keys: Line<'static>,
    width: u16,
    theme: Theme,
) {
    let inner_width = usize::from(width.min(body.width).saturating_sub(2).max(1));
    let wrapped: usize = lines
        .iter()
        .map(|line| line.width().div_ceil(inner_width).max(1))
        .sum();
    // Border, wrapped text, a blank line, the keys.
    let height = u16::try_from(wrapped + 4).unwrap_or(u16::MAX);
    let area = centered(body, width, height);
    frame.render_widget(Clear, area);
    frame.render_widget(block(title, theme), area);
    let inner = area.inner(ratatui::layout::Margin::new(1, 1));
    let keys_row = Rect {
        y: inner.y + inner.height.saturating_sub(1),
        height: inner.height.min(1),
        ..inner
    };
    let text_area = Rect {
        height: inner.height.saturating_sub(2),
        ..inner
    };
    frame.render_widget(
        Paragraph::new(Text::from(lines).alignment(Alignment::Left)).wrap(Wrap { trim: false }),
        text_area,
    );
    frame.render_widget(Paragraph::new(keys), keys_row);
}

/// What the dialogs say of a claim owner the registry does not see as live.
fn owner_trouble_text(app: &App, owner: &str) -> Option<(String, bool)> {
    let liveness = app.snapshot.as_ref()?.owner_trouble(owner)?;
    let (mark, alarm) = owner_mark(liveness);
    let why = match liveness {
        Liveness::Stale => "no heartbeat for longer than its lease: the process is likely dead",
        Liveness::Stalled => {
            "its heartbeat is late: hung, cut off, or in a very long round; its claims may still \
             be valid"
        }
        _ => "the replica stopped and left this claim behind",
    };
    Some((format!("{mark}: {why}"), alarm))
}

/// The column picker (`c`): every column of the schedules table, checked when shown, the cursor
/// on one; space toggles it.
pub(super) fn draw_columns(frame: &mut Frame, body: Rect, app: &App, cursor: usize, theme: Theme) {
    let mut lines: Vec<Line> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, what))| {
            let shown = app.columns.get(i).copied().unwrap_or(true);
            let always = column_name(i) == ALWAYS_SHOWN;
            let check = match (always, shown) {
                (true, _) => "[=]",
                (false, true) => "[x]",
                (false, false) => "[ ]",
            };
            let line = Line::from(vec![
                Span::raw(if i == cursor { "› " } else { "  " }),
                Span::raw(format!("{check} ")),
                Span::styled(format!("{:<9}", column_name(i)), theme.title()),
                Span::raw(*what),
            ]);
            if i == cursor {
                line.style(theme.selected())
            } else {
                line
            }
        })
        .collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "↑↓ move  space toggles  Esc closes  ([=] always shows; top --columns chooses at start)",
        theme.dim(),
    ));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let area = centered(body, body.width.saturating_sub(4), height.min(body.height));
    draw_popup(frame, area, "Columns (c)", Text::from(lines), theme);
}

pub(super) fn draw_help(frame: &mut Frame, area: Rect, scroll: u16, theme: Theme) {
    let mut lines: Vec<Line> = KEYS
        .iter()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!("{keys:<16}"), theme.title()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.extend(COLUMNS.iter().map(|(column, what)| {
        Line::from(vec![
            Span::styled(format!("{column:<16}"), theme.title()),
            Span::raw(*what),
        ])
    }));
    let total = u16::try_from(lines.len()).unwrap_or(u16::MAX);
    let area = centered(area, 104, total.saturating_add(2));
    let inner = area.height.saturating_sub(2);
    let scroll = scroll.min(total.saturating_sub(inner));
    let title = if inner < total {
        format!(
            "Keys and columns, lines {}-{} of {total} (↑↓ PgUp PgDn scroll; ? or Esc closes)",
            scroll + 1,
            (scroll + inner).min(total)
        )
    } else {
        "Keys and columns; times are database time (? or Esc closes)".to_owned()
    };
    frame.render_widget(Clear, area);
    // Not wrapped: a wrapped line would make the scroll count rows, not lines; a key's text is
    // written to fit the overlay's width.
    frame.render_widget(
        Paragraph::new(Text::from(lines))
            .block(block(&title, theme))
            .scroll((scroll, 0)),
        area,
    );
}

pub(super) fn draw_filter(frame: &mut Frame, body: Rect, input: &str, theme: Theme) {
    let area = Rect {
        y: body.y + body.height.saturating_sub(3),
        height: 3.min(body.height),
        ..body
    };
    let line = Line::from(vec![
        Span::raw(format!("/{}", clean(input))),
        Span::styled("█", theme.dim()),
        Span::styled(
            "   part of PROJECT/TRIGGER or owner; Enter applies, Esc cancels",
            theme.dim(),
        ),
    ]);
    draw_popup(frame, area, "Filter", Text::from(line), theme);
}

pub(super) fn field(name: &str, value: String, theme: Theme) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{name:<15}"), theme.title()),
        Span::raw(value),
    ])
}

/// Runs the detail panel lists (its title counts these, not what was loaded).
pub(super) const DETAIL_RUNS: usize = 5;

pub(super) fn draw_detail(
    frame: &mut Frame,
    body: Rect,
    app: &App,
    name: &str,
    detail: Option<&TriggerDetail>,
    pause: Option<&PauseView>,
    theme: Theme,
) {
    let area = centered(
        body,
        body.width.saturating_sub(4),
        body.height.saturating_sub(2),
    );
    let Some(detail) = detail else {
        draw_popup(frame, area, name, Text::from("loading…"), theme);
        return;
    };
    let diagnosis = &detail.why_not_firing;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("why not firing ", theme.title()),
            Span::styled(diagnosis.reason(), theme.warn()),
        ]),
        field("fix", diagnosis.fix().to_owned(), theme),
    ];
    if let Some(state) = &detail.state {
        let now = state.now_ms;
        if let Some(pause) = pause {
            lines.push(field(
                "paused",
                format!("{} · p resumes", pause_text(pause, now)),
                theme,
            ));
        }
        let d = &state.definition;
        let s = &state.schedule;
        lines.push(field(
            "definition",
            format!(
                "cron \"{}\" in {} · misfire {} (grace {}) · revision {} · {} · project {} · task {}",
                d.cron_expr,
                d.time_zone,
                d.misfire_policy,
                span(d.misfire_grace_ms),
                d.revision,
                if d.enabled { "enabled" } else { "disabled" },
                d.project_status,
                d.task_id
            ),
            theme,
        ));
        lines.push(field(
            "schedule",
            format!(
                "{} · next {} · last {} · revision {} · state v{} · claim v{}",
                if pause.is_some() {
                    "paused"
                } else {
                    s.state.as_str()
                },
                // A parked row is never due: its cursor is shown, with no countdown or lag.
                match s.next_fire_at_ms {
                    None => "-".to_owned(),
                    Some(n) if s.state.is_parked() || pause.is_some() => {
                        format!("{} (parked)", utc(n))
                    }
                    Some(n) => format!("{} ({})", utc(n), signed(n - now)),
                },
                s.last_scheduled_at_ms.map_or_else(|| "-".to_owned(), utc),
                s.trigger_revision,
                s.state_version,
                s.claim_version
            ),
            theme,
        ));
        match &state.claim {
            Some(claim) => {
                lines.push(field(
                    "claim",
                    format!(
                        "{} · token {} · v{} · acquired {} · expires {} ({})",
                        claim.owner,
                        claim.token,
                        claim.version,
                        utc(claim.acquired_at_ms),
                        utc(claim.expires_at_ms),
                        signed(claim.remaining_ms)
                    ),
                    theme,
                ));
                // As the row and the `e`/`E` dialogs say it: whether anyone is left to use the
                // claim before its lease runs out.
                if let Some((trouble, alarm)) = owner_trouble_text(app, &claim.owner) {
                    lines.push(Line::from(vec![
                        Span::styled(format!("{:<15}", "claim owner"), theme.title()),
                        Span::styled(trouble, if alarm { theme.alarm() } else { theme.warn() }),
                    ]));
                }
            }
            None => lines.push(field("claim", "none".to_owned(), theme)),
        }
        let runs = &state.recent_runs[..state.recent_runs.len().min(DETAIL_RUNS)];
        lines.push(Line::styled(
            format!("latest runs ({})", runs.len()),
            theme.title(),
        ));
        for run in runs {
            lines.push(Line::raw(format!(
                "  {}  {}  {}",
                utc(run.scheduled_for_ms),
                run.status,
                clean(&run.idempotency_key)
            )));
        }
        if !state.audit.is_empty() {
            lines.push(Line::styled("operator actions", theme.title()));
            for entry in state.audit.iter().take(3) {
                lines.push(Line::raw(format!(
                    "  {}  {} by {} (login {}){}",
                    utc(entry.at_ms),
                    entry.action,
                    entry.actor,
                    entry.db_user,
                    entry
                        .reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )));
            }
        }
    }
    draw_popup(
        frame,
        area,
        &format!("{name} (Esc closes)"),
        Text::from(lines),
        theme,
    );
}

/// `by ops@host at 2026-…Z (3m05s ago): why`.
pub(super) fn pause_text(pause: &PauseView, now: i64) -> String {
    format!(
        "by {} at {} ({} ago): {}",
        clean(&pause.paused_by),
        utc(pause.paused_at_ms),
        span(now - pause.paused_at_ms),
        pause
            .reason
            .as_deref()
            .map_or_else(|| "no reason given".to_owned(), clean)
    )
}

pub(super) fn draw_confirm_pause(
    frame: &mut Frame,
    body: Rect,
    app: &App,
    request: &PauseRequest,
    theme: Theme,
) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let verb = if request.resume { "Resume" } else { "Pause" };
    let mut lines = vec![
        Line::styled(format!("{verb} {}?", request.key), theme.title()),
        Line::raw(""),
    ];
    match &request.paused {
        Some(pause) if request.resume => {
            lines.push(field("paused by", clean(&pause.paused_by), theme));
            lines.push(field(
                "at",
                format!(
                    "{} ({} ago)",
                    utc(pause.paused_at_ms),
                    span(now - pause.paused_at_ms)
                ),
                theme,
            ));
            lines.push(field(
                "reason",
                pause
                    .reason
                    .as_deref()
                    .map_or_else(|| "no reason given".to_owned(), clean),
                theme,
            ));
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "The occurrences that passed while paused are recorded as one misfire record,",
            ));
            lines.push(Line::raw(
                "not run (backfill admits them if wanted); the cursor moves to the first",
            ));
            lines.push(Line::raw(
                "occurrence from now. A disabled trigger stays disabled. Audited.",
            ));
        }
        _ => {
            let claim = match &request.claim_owner {
                Some(owner) => format!("{} is voided: its admission fails its fence", clean(owner)),
                None => "none in flight".to_owned(),
            };
            lines.push(field("claim", claim, theme));
            lines.push(field("reason", "paused from qlsched top".to_owned(), theme));
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "No replica claims it until it is resumed (p again, or qlsched resume).",
            ));
            lines.push(Line::raw(
                "The manifest's enabled is left as it is, and publish leaves the pause. Audited.",
            ));
        }
    }
    draw_dialog(
        frame,
        body,
        &format!("{verb} trigger"),
        lines,
        confirm_keys(&verb.to_lowercase(), theme),
        84,
        theme,
    );
}

pub(super) fn draw_confirm(
    frame: &mut Frame,
    body: Rect,
    app: &App,
    request: &ExpireRequest,
    theme: Theme,
) {
    let now = app.snapshot.as_ref().map_or(0, |s| s.now_ms());
    let fence = &request.fence;
    let lease = if fence.expires_at_ms <= now {
        format!(
            "{} (expired {} ago)",
            utc(fence.expires_at_ms),
            span(now - fence.expires_at_ms)
        )
    } else {
        format!(
            "{} (in {}: the lease is still running)",
            utc(fence.expires_at_ms),
            span(fence.expires_at_ms - now)
        )
    };
    let mut lines = vec![
        Line::styled(
            format!("Expire the claim on {}?", request.key),
            theme.title(),
        ),
        Line::raw(""),
        field("owner", clean(&fence.owner), theme),
    ];
    if let Some((trouble, alarm)) = owner_trouble_text(app, &fence.owner) {
        lines.push(Line::from(vec![
            Span::raw(format!("{:<15}", "")),
            Span::styled(trouble, if alarm { theme.alarm() } else { theme.warn() }),
        ]));
    }
    lines.extend([
        field("token", fence.token.to_string(), theme),
        field("claim version", fence.version.to_string(), theme),
        field("expires", lease, theme),
        Line::raw(""),
        Line::raw("Only this exact claim is expired: if it moved since, nothing changes."),
        Line::raw("Its holder's admission will fail its fence. The expiry is audited."),
    ]);
    draw_dialog(
        frame,
        body,
        "Expire claim",
        lines,
        confirm_keys("expire", theme),
        76,
        theme,
    );
}

/// The last line of a dialog that changes something: `[y] <verb>  [n/Esc] cancel`.
fn confirm_keys(verb: &str, theme: Theme) -> Line<'static> {
    Line::from(vec![
        Span::styled("[y]", theme.alarm()),
        Span::raw(format!(" {verb}  ")),
        Span::styled("[n/Esc]", theme.title()),
        Span::raw(" cancel"),
    ])
}

pub(super) fn draw_confirm_owner(
    frame: &mut Frame,
    body: Rect,
    app: &App,
    request: &OwnerExpireRequest,
    theme: Theme,
) {
    let total = request.valid + request.expired;
    let mut lines = vec![
        Line::styled(
            format!(
                "Expire every claim of {}? ({total} on screen)",
                clean(&request.owner)
            ),
            theme.title(),
        ),
        Line::raw(""),
        field("valid", request.valid.to_string(), theme),
        field("lease over", request.expired.to_string(), theme),
        Line::raw(""),
        Line::raw("Every claim it holds when this runs is expired in one transaction, as"),
        Line::raw("`qlsched expire --owner` does; each is audited. Its admissions then fail"),
        Line::raw("their fence, and other replicas take the rows at once."),
    ];
    if request.live {
        lines.push(Line::styled(
            "It is a live replica: it loses this round's work and claims again.",
            theme.warn(),
        ));
    } else if let Some((trouble, alarm)) = owner_trouble_text(app, &request.owner) {
        lines.push(Line::styled(
            format!("It is {trouble}."),
            if alarm { theme.alarm() } else { theme.warn() },
        ));
    }
    draw_dialog(
        frame,
        body,
        "Expire an owner's claims",
        lines,
        confirm_keys("expire all", theme),
        80,
        theme,
    );
}

/// A span as `in 4.2s` or `3s ago`.
pub(super) fn signed(ms: i64) -> String {
    if ms >= 0 {
        format!("in {}", span(ms))
    } else {
        format!("{} ago", span(-ms))
    }
}
