//! The prose of the man pages that clap cannot derive: exit statuses, environment, examples, and
//! the JSON wire format of each subcommand. JSON shapes are stable: fields are only ever added.

pub const EXIT_STATUS: &str = "\
The same for every subcommand:

  0   success
  1   unexpected error
  2   usage error: a flag or argument that is malformed or out of range, whatever the flag (a malformed PROJECT/TRIGGER, a negative --version or --limit, --batch 0, --lease 0s or -1s, an empty --owner, a bad duration, an unknown --state, a bad --schema), refused before anything connects; a destructive action without --yes and without a terminal; `demo --database` naming a database no demo made
  3   fence rejected: the claim named no longer holds (other owner, newer version, expired)
  4   not found (a trigger or run; `expire --owner` naming an owner that holds no claim and that no audit row, admitted run or misfire record names)
  5   nothing eligible (no due, unclaimed row; a named row that is not eligible, or holds no claim to expire); also a `backfill` whose window reaches before the runs' retention horizon, or a `fire --request-id` whose earlier run retention deleted (nothing written: before the horizon a run may be gone)
  6   definition refused: the claim held, and the trigger's definitions no longer admit the occurrence at admission (the project not active, the trigger or task changed, an execution revision whose digest does not match its spec; SQLSTATE QLD01); nothing written, the claim given back
  7   outage: `inspect --check` found one (no live replica while rows are due, rows overdue beyond their misfire grace, or no admission in the last minute while a row has been due for longer); it prints the headline, the likely cause and the next command to run first
  65  bad input data (a manifest, with the JSON path, including a NUL (\\u0000) anywhere in it, and invalid UTF-8, with its byte offset; a cron expression, time zone, a malformed claim token or run id)
  69  database unavailable (including no answer within connect_timeout, and no TLS where sslmode requires it; also: the throw-away server of `demo --embedded` failed to start)
  75  transient conflict: serialization failures (40001) or deadlocks (40P01) that outlasted the retries, or hit where nothing retries them, or a statement or lock wait past its bound (57014, 55P03); the message keeps the server's last SQLSTATE, detail and hint
  77  permission denied by the database role, a login refused (password, client certificate), or the server's TLS certificate refused
  78  schema not ready, or configuration read from the environment or a file invalid (QLSCHED_SCHEMA or QLSCHED_OWNER, named in the message; a connection string; the PG* variables; a connection pooler refusing a startup parameter the connection settings give, such as PgBouncer's \"unsupported startup parameter: options\", with the setting to change; `migrate`, `demo` or `bench` given --pooler transaction; a transaction-mode pooler qlsched was not told of, found by what it does to sessions or by a prepared statement it lost, named with --pooler transaction; a writer's login made read-only by default_transaction_read_only; a setting the server does not know in PGOPTIONS or the string's options; a replica's startup statement cut by its login's own statement_timeout, named with the setting; also: `demo --embedded` finds no initdb and pg_ctl of PostgreSQL 15 or newer, or runs as root with no system user postgres to run the server as)
  130 interrupted: `bench` stopped by SIGINT or SIGTERM (its scratch database dropped unless --keep); a second Ctrl-C while the interactive `claim` waits on a stalled database step (a claim already taken expires with its lease); `backfill` stopped by SIGINT or SIGTERM between transactions (after its summary; what committed stays, a rerun continues)

A closed standard output (qlsched ... | head) ends the command quietly with status 0.

With -o json an error is one JSON object on one line of stderr, and nothing is written to stdout (a check that fails, such as migrate verify or inspect invariants, prints its report on stdout first): {\"error\": string (the message the table format prints after qlsched:), \"exit_status\": int, \"kind\": \"usage\"|\"fence_rejected\"|\"not_found\"|\"nothing_eligible\"|\"definition_refused\"|\"outage\"|\"bad_input\"|\"bad_manifest\"|\"unavailable\"|\"transient\"|\"conflict\"|\"timed_out\"|\"permission_denied\"|\"schema_not_ready\"|\"config\"|\"interrupted\"|\"unexpected\"}, and for bad_manifest \"path\" (the JSON path) and \"reason\"; for an owner never seen (expire --owner, exit 4) \"owner\" and \"seen\": false. Fields are only ever added.

Echoed values (ids, owners, reasons, paths) are written with control characters escaped (ESC as \\u{1b}) and, past 512 bytes, cut with their length said: …(10240 bytes).";

pub const ENVIRONMENT: &str = "\
QLSCHED_DATABASE_URL, DATABASE_URL
PostgreSQL URL (postgres://user@host:port/db) or key=value string, used when --database-url is not given, in this order.

PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGAPPNAME
As for libpq: used when no URL is given, and to fill what a URL leaves out. Defaults as libpq's: the local socket, the operating-system user, a database of the user's name. A password is never printed or logged.

PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY
TLS, as the sslmode, sslrootcert, sslcert and sslkey settings of the URL: disable, allow, prefer (default), require, verify-ca, verify-full, with libpq's meaning. require with a root certificate (sslrootcert, or ~/.postgresql/root.crt) checks the chain as verify-ca; sslrootcert=system uses the machine's trust store and implies verify-full. A refused server certificate exits 77 naming what did not match.

PGPASSFILE
The password file (default ~/.pgpass, as the passfile setting), read when no password is given: host:port:database:user:password lines, * for any. A file the group or others can read is ignored with a warning.

PGCONNECT_TIMEOUT
Seconds each host may take to connect, TLS handshake and authentication included, as the connect_timeout setting (default 10; 0 waits forever). No answer in time exits 69.

PGTARGETSESSIONATTRS
Which of several hosts to keep, as the target_session_attrs setting: any, read-write, read-only, primary, standby, prefer-standby, with libpq's meaning (checked after connecting). Unset, commands that write ask for read-write and commands that read (inspect, top, the dry runs of publish and claim) for any, the dry runs of fire, backfill, pause, resume and expire, which lock and write before rolling back, for read-write; set, it wins. Another value exits 78; no host that fits exits 69.

PGSERVICE, PGSERVICEFILE, PGSYSCONFDIR
The connection service to read (as service= in the connection string), and where: PGSERVICEFILE (default ~/.pg_service.conf), else PGSYSCONFDIR/pg_service.conf (default /etc/postgresql-common), as libpq reads them. The service's settings fill what the connection string leaves out, before the other PG* variables. A service found nowhere, or a keyword qlsched does not read in it, exits 78.

PGOPTIONS
Startup options (-c name=value ...) for every session, as the options setting, when the connection string gives none. qlsched sends none of its own: it sets its schema and settings on each session once it opens, and again in each transaction.

QLSCHED_SCHEMA
The schema that holds the qlsched tables (default qlsched), as --schema: 1 to 63 lower-case letters a-z, digits and underscores, starting with a letter or underscore, and not starting with pg_. A bad --schema is a usage error (2); a bad QLSCHED_SCHEMA a configuration error (78); the message says which.

QLSCHED_POOLER
What sits between qlsched and PostgreSQL, as --pooler: none (default), session (a pooler in session mode, served as none is) or transaction (a pooler in transaction mode: nothing is set on a session, and a replica sends its statements unnamed with their parameter types). migrate, demo and bench refuse transaction with 78: they need a session of their own. Another value is a usage error (2).

QLSCHED_OWNER
The claim owner of qlsched run, as --owner: 1 to 200 characters without control characters. Out of bounds it is a configuration error (78) naming QLSCHED_OWNER; a bad --owner is a usage error (2).

QLSCHED_POSTGRES_BIN
The directory holding initdb and pg_ctl for the throw-away server of demo, as --postgres-bin.

QLSCHED_LOG
Log filter for stderr, e.g. debug or qlsched=trace (default: info for run and demo, warn otherwise). Levels: error (a round or admission the database refused), warn (a failed round, a misfire record, a lost fence, drifted runs at start), info (start, stop, a summary a minute), debug (each admitted run), trace.

QLSCHED_LOG_FORMAT
text (default) or json, as --log-format: json writes one object per line with timestamp, level, message, target and the event's fields, the error that ends a command included.

QLSCHED_METRICS_ADDR
HOST:PORT where qlsched run serves /metrics, /healthz and /readyz, as --metrics-addr (default: off).

NO_COLOR
When set and not empty, no colour under --color auto.";

pub const SEE_ALSO: &str = "\
qlsched-migrate(1), qlsched-publish(1), qlsched-run(1), qlsched-claim(1), qlsched-cron(1), qlsched-inspect(1), qlsched-pause(1), qlsched-resume(1), qlsched-backfill(1), qlsched-expire(1), qlsched-fire(1), qlsched-top(1), qlsched-demo(1), qlsched-bench(1). The operator's guide: docs/OPERATIONS.md. The design: docs/DESIGN.md in the source repository.";

pub fn examples(command: &str) -> &'static str {
    match command {
        "migrate" => {
            "\
Create or upgrade the schema, as its owner (a login with CREATE on the database the first time,
the schema's owner after; any other is refused with 77, naming the right it lacks):
  qlsched -D postgres://qlsched_owner@db/prod migrate

What is pending, and which running replicas would have to stop for it:
  qlsched migrate status

Check checksums and grants from a deployment script (exit 78 on any difference):
  qlsched migrate verify -o json"
        }
        "publish" => {
            "\
Publish a manifest, or see first what it would change:
  qlsched publish -f triggers.json --dry-run
  qlsched publish -f triggers.json

From standard input, for scripts:
  generate-manifest | qlsched publish -f - -o json

A trigger's misfire_grace (default 60s) is how late an occurrence may be decided and still run: a
replica that fell behind admits every occurrence up to that late, each once, in order. Occurrences
later than the grace are misfires: misfire skip (the default) passes over all of them, fire_once
admits the latest; either way they are written down as one misfire record (qlsched inspect
misfires). Every occurrence is a run or inside a record:
  {\"projects\": [{\"id\": \"acme\", \"tasks\": [{\"id\": \"backup\", \"execution\": {\"kind\": \"remote_worker\"}}],
    \"triggers\": [{\"id\": \"nightly\", \"task\": \"backup\", \"cron\": \"0 3 * * *\", \"time_zone\": \"Europe/Berlin\",
                  \"misfire\": \"fire_once\", \"misfire_grace\": \"10m\"}]}]}"
        }
        "run" => {
            "\
A replica with the defaults (16 claims a round, 30 s leases, 1 s cadence):
  QLSCHED_DATABASE_URL=postgres://runtime@db/prod qlsched run

A replica with a fixed owner name and short leases, e.g. under a supervisor:
  qlsched run --owner sched-1 --lease 10s --drain-timeout 5s

Watched by Prometheus, logging JSON for a log pipeline (deploy/ has a systemd unit and Kubernetes
manifests; docs/alerts.yml example alerts):
  qlsched --log-format json run --metrics-addr 0.0.0.0:9726
  curl -s localhost:9726/metrics     # Prometheus text format, qlsched_* metrics
  curl -s localhost:9726/healthz     # 200 while a round started within lease + cadence
  curl -s localhost:9726/readyz      # 200 when schema, privileges, connection and a writable server are good

Both probes answer {\"status\": \"ok\"|\"failing\", \"reason\": string}, 503 when failing."
        }
        "top" => {
            "\
Watch the cluster live (q quits, ? lists every key):
  qlsched -D postgres://observer@db/prod top

Look without being able to touch anything, refreshing every 5 s:
  qlsched top --read-only --refresh 5s

In a stuck-claim investigation: select the row marked !, Enter shows why it is not firing, e shows
its fence and expires exactly that claim after y (fenced and audited, as qlsched expire).

During an incident: select a trigger, p asks and pauses it after y (a claim in flight is voided, as
qlsched pause does); p on a paused row resumes it. Both need the qlsched_admin role; an observer's
login is told so in the status line.

Without a terminal, top exits 2; scripts use inspect instead:
  qlsched inspect -o json"
        }
        "demo" => {
            "\
The first look, against the local server (on a terminal it opens top on the demo database):
  qlsched demo

For a minute, against another server:
  qlsched -D postgres://postgres@127.0.0.1/postgres demo --duration 1m

On a throw-away PostgreSQL of its own (installed, not necessarily running), stopped and deleted at the end:
  qlsched demo --embedded --duration 20s | cat

With no connection setting given and nothing answering at libpq's default, plain `qlsched demo` does the same and says so on stderr."
        }
        "claim" => {
            "\
Claim the next due row, look at the fence and the decision, and answer admit, hold or release:
  qlsched claim

Claim one trigger and keep the claim (a script; the fence is in the JSON):
  qlsched claim acme/nightly --hold --owner ops-script -o json

Admit or give back that claim later, with the fence passed back (exit 3 if it no longer holds):
  qlsched claim admit acme/nightly --token 0190f3c2-5c1e-7d3a-9a41-2f7b3c8d9e10 --version 7 --yes
  qlsched claim release acme/nightly --token 0190f3c2-5c1e-7d3a-9a41-2f7b3c8d9e10 --version 7

See which row would be claimed and what would be decided, changing nothing:
  qlsched claim --dry-run

Catch a row that replicas keep taking: try again until it is due and unclaimed, for up to 30 s (then exit 5):
  qlsched claim acme/nightly --wait 30s --hold -o json"
        }
        "inspect" => {
            "\
The summary: rows by state, claims per owner, the oldest overdue row, admissions per minute:
  qlsched inspect

Why is a trigger not firing?
  qlsched inspect trigger acme/nightly

Claims past their lease, and the overdue rows, for a script:
  qlsched inspect claims --expired -o json
  qlsched inspect schedules --state due --limit 20 -o json

Check every promise and the grants (exit 1 on any failure):
  qlsched inspect invariants

Is there an outage? For a probe or a cron job (exit 7 when there is one):
  qlsched inspect --check || page-oncall

What falls due together over the next day, and how long admitting it takes:
  qlsched inspect load
  qlsched inspect load --from 2027-03-28T00:00:00Z    # a daylight-saving change day"
        }
        "expire" => {
            "\
Expire exactly the claim a script saw (exit 3 if it changed in between):
  qlsched expire acme/nightly --token 0190f3c2-5c1e-7d3a-9a41-2f7b3c8d9e10 --version 7 --reason 'stuck' --yes

Expire whatever claim the row holds, after looking at it (asks on a terminal):
  qlsched expire acme/nightly --reason 'replica sched-2 hung'

Every claim of a replica known to be dead, in one transaction:
  qlsched expire --owner sched-2:4711 --yes --reason 'host lost'
  qlsched expire --owner sched-2:4711 --expired-only --dry-run"
        }
        "cron" => {
            "\
The next ten occurrences of a nightly trigger, in its zone and UTC (no database needed):
  qlsched cron '30 2 * * *' --time-zone Europe/Berlin

Around a spring-forward gap and an autumn fold (marked in the DST column):
  qlsched cron '30 2 * * *' -z Europe/Berlin --from 2026-03-28T00:00:00Z -n 3
  qlsched cron '*/30 1 * * *' -z America/New_York --from 2026-11-01T04:00:00Z -n 5 -o json

An expression publish would refuse exits 65 with publish's message."
        }
        "fire" => {
            "\
Run a trigger now, once, whatever its schedule (asks on a terminal):
  qlsched fire acme/nightly

From a script that may retry: the same request id never admits a second run (the second call reports the first run, created false):
  qlsched fire acme/nightly --request-id deploy-4711 --yes -o json"
        }
        "backfill" => {
            "\
See what refilling last night's outage would admit, then do it:
  qlsched backfill acme/nightly --from 2026-12-01T00:00:00Z --to 2026-12-02T06:00:00Z --dry-run
  qlsched backfill acme/nightly --from 2026-12-01T00:00:00Z --to 2026-12-02T06:00:00Z --yes -o json

Running it again admits nothing: every occurrence already has its run. Ctrl-C stops between transactions; the same command continues."
        }
        "pause" => {
            "\
Stop a trigger during an incident, at once (a claim in flight is voided):
  qlsched pause acme/nightly --reason 'INC-4711: downstream down' --yes

Every trigger of a project, and what is paused now:
  qlsched pause --project acme --reason maintenance --yes
  qlsched inspect schedules --state paused"
        }
        "resume" => {
            "\
Start it again; the occurrences passed while paused become one misfire record (reason paused):
  qlsched resume acme/nightly --yes -o json

Run what was missed after all:
  qlsched backfill acme/nightly --from 2026-12-01T10:00:00Z --to 2026-12-01T12:00:00Z --yes"
        }
        "bench" => {
            "\
The headline figure of the performance notes: 10,000 due triggers, 4 replicas, as JSON:
  qlsched -D postgres://postgres@127.0.0.1/postgres bench --triggers 10000 --replicas 4 -o json

Claim cost at a million schedule rows, 1 % of them due:
  qlsched bench --triggers 10000 --rows-total 1000000

Larger batches, and a database kept for a look afterwards:
  qlsched bench --batch 64 --keep

The bench creates (and drops, unless --keep) its own database qlsched_bench_PID on the server
the connection settings name; it needs the right to create databases. It exits 1 after printing
its report when the --duration cap cut it short or an invariant was broken."
        }
        _ => {
            "\
  qlsched demo
  qlsched migrate && qlsched publish -f examples/demo.json && qlsched run"
        }
    }
}

/// The notes of the JSON OUTPUT sections, each of one page's words (`publish`, `inspect audit`);
/// a command's own page (`inspect`) carries all of its family's.
const NOTES: &[(&str, &str)] = &[
    (
        "inspect",
        "inspect exits 78 when schema_problem is set; inspect --check exits 7 when outage is set, after printing its report.",
    ),
    (
        "inspect load",
        "inspect load's boundaries are the instants with the most occurrences, most first; expected_admission_ms is occurrences / rate_per_s, null without runs in the last hour.",
    ),
    (
        "inspect replicas",
        "inspect replicas lists stale replicas first, then stalled, live and stopped ones; stopped replicas are forgotten a day after they stopped, any other replica after its --forget-stale-after since its last heartbeat (15 minutes by default; a week for rows of releases before 0.2.0).",
    ),
    (
        "inspect schedules",
        "In inspect schedules a paused row's state is paused and a row of a disabled trigger or a suspended project disabled: no replica claims either, and neither is ever due.",
    ),
    (
        "inspect trigger",
        "The recent_runs of inspect trigger carry no origin; its occurrences are those of qlsched cron, the next five after now_ms.",
    ),
    (
        "inspect invariants",
        "A gap of inspect invariants is an occurrence between the later of the window's start and the revision's first cursor, and the cursor, with neither a run nor a misfire record.",
    ),
    ("inspect audit", "inspect audit lists newest first."),
    (
        "inspect misfires",
        "inspect misfires lists newest first; misfire records are kept 7 days.",
    ),
    (
        "claim",
        "claim --dry-run reads only (a qlsched_observer login may run it): it shows the row a claim would take and the decision, writes no claim and no audit row, and the table says dry run: nothing written.",
    ),
    (
        "claim admit",
        "claim admit is a manual admission: on a terminal it shows the decision and asks; without one it needs --yes; --dry-run shows the decision and admits nothing.",
    ),
    ("claim release", "claim release prints the fence as it was."),
    (
        "publish",
        "With --dry-run the revisions are those the publish would write; it reads only (a qlsched_observer login may run it) and writes nothing, and the table says dry run: nothing written.

The manifest: {\"projects\": [{\"id\", \"status\": \"active\"|\"suspended\", \"tasks\": [{\"id\", \"execution\": {\"kind\": \"remote_worker\", ...}}], \"triggers\": [{\"id\", \"task\", \"cron\", \"time_zone\", \"misfire\": \"skip\"|\"fire_once\", \"misfire_grace\", \"enabled\"}]}]}. Unknown fields are refused with their JSON path (exit 65), except inside execution: it belongs to the dispatcher, so every key beside kind is accepted and stored as given (on purpose), and only a NUL (\\u0000) in it is refused, as PostgreSQL cannot store one.",
    ),
    (
        "fire",
        "The idempotency key is ql3:manual:v1:PROJECT/TRIGGER:REVISION:REQUEST_ID and scheduled_for_ms the database time of the admission. With --dry-run everything is checked and nothing written; run_id is the id the run would have had. Refused with exit 5 and the reason for a suspended project, a corrupt execution revision or a schedule row behind its trigger; exit 3 when the trigger was published again between reading it and admitting.",
    ),
    (
        "backfill",
        "Transactions hold at most 500 occurrences each; an interrupted backfill exits 130 after the summary. A window reaching the database's now, --from after --to, or more occurrences than --max exit 65 before anything is written; a disabled trigger, a suspended project or a corrupt execution revision exit 5.",
    ),
    (
        "pause",
        "A trigger or project without schedule rows exits 4.",
    ),
    (
        "resume",
        "A trigger or project without schedule rows exits 4.",
    ),
    (
        "expire",
        "The versions are as they are after the expiry. With --owner, an owner that holds nothing to expire gives an empty list and owner_seen true (exit 0) when it was seen before (a claim it holds that is not expired yet, the replica registry, an audit row's fence or a misfire record names it; the registry forgets a replica after its --forget-stale-after since its last heartbeat, 15 minutes by default; a week for rows of releases before 0.2.0); an owner never seen is exit 4, a likely typo. A named row without a claim exits 5.",
    ),
    (
        "bench",
        "bench --steady prints the second shape instead of the first. A run's lag is created_at_ms - scheduled_for_ms in database time; percentiles are nearest-rank. bench exits 1 after the report when the run was not complete, its runs differ from due, or any of duplicates, runs_without_one_attempt, runs_without_two_events and orphans is above 0; bench --steady when no occurrence was admitted, or any of short_occurrences, duplicates, unaccounted, runs_without_one_attempt and runs_without_two_events is above 0.",
    ),
];

/// What the JSON OUTPUT section of the page of `page` (a command's words: `inspect`,
/// `inspect audit`) says besides its shapes, which are rendered from the printed types
/// (`super::contract::section`) and come first: how a flag changes what is printed, ordering,
/// and the exit statuses that go with an output. A command's page has its family's notes, a
/// nested page its own.
pub fn json_section(page: &str) -> Option<String> {
    let notes: Vec<&str> = NOTES
        .iter()
        .filter(|(words, _)| super::contract::on_page(words, page))
        .map(|(_, note)| *note)
        .collect();
    (!notes.is_empty()).then(|| notes.join(" "))
}

/// Sections only some pages have: `top`'s keys, columns and panels, from the lists its `?`
/// overlay shows.
pub fn extra_sections(command: &str) -> Vec<(&'static str, String)> {
    let listed = |rows: &[(&str, &str)]| {
        rows.iter()
            .map(|(name, what)| format!("  {name:<16}{what}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match command {
        "top" => vec![
            (
                "KEYS",
                format!(
                    "{}\n\n? in top lists these keys and the columns below.",
                    listed(crate::tui::input::KEYS)
                ),
            ),
            (
                "COLUMNS",
                format!(
                    "The schedules table, most urgent first (expired claims nobody took over, overdue rows, live claims, uninitialized rows, then the rest):\n\n{}\n\n\
The mis column is read per refresh for the rows loaded, one bounded probe of the misfires_trigger index each; qlsched inspect misfires --trigger PROJECT/TRIGGER lists the records.\n\n\
The state column tells the two ways a row is switched off apart: paused is an operator's (p, or qlsched pause; the detail names who, when and why), disabled is the manifest's (enabled false, or the project suspended). The header counts them apart too.\n\n\
The replicas panel lists the replicas of the registry that have not stopped, as qlsched inspect replicas does, idle ones included: STALE ones first (no heartbeat for longer than their lease plus their cadence: their claims have expired), then STALLED ones (no heartbeat for two cadences, at least a second: hung, cut off or in a very long round, their claims perhaps still valid), then live ones, each with its heartbeat, the claims it holds (valid and expired), its last claim and its admissions in the last minute. Then every other claim owner: stopped (a replica that stopped and left claims or admissions behind) or operator (not a registered replica: an operator's manual claims, qlsched claim). ! ALL CLAIMS EXPIRED marks an owner whose every claim ran out.\n\n\
On a standby the header says standby, replay lag N (the database's now minus the last replayed commit; unknown before the first replay): what it shows may be behind the primary.\n\n\
The replicas panel also carries each replica's failed rounds, fence losses and misfires (fail, fence, misf, since it started), its version on a terminal of 130 columns or more, and its last error. A claim whose owner is STALE, STALLED or stopped says so beside the owner, in its row, in the e and E dialogs and in the detail (Enter).\n\n\
c opens a picker of the table's columns (space toggles one; the trigger's always shows); --columns chooses them at start.\n\n\
An outage is a banner under the header, with its likely cause and the next command: no live replica while rows are due (qlsched run when none ever ran, else qlsched inspect replicas), rows later than their misfire grace plus 10s (qlsched inspect claims), or nothing admitted in the last minute while a row has waited longer (qlsched inspect replicas).\n\n\
The trends, from what each replica's heartbeat writes minute by minute (the replica_minutes table, kept a week), so exact and full when top opens: per bar of the window ([ and ]: 15m, 1h, 6h, 12h, 24h; 60 bars, or 15 of a minute over 15m), the runs the replicas admitted, the lag's p50 and p99 (claim time minus occurrence, from merged log-scale histograms: at most half above the true value; on a log scale), misfired occurrences, fence losses and failed rounds. Manual admissions (fire, backfill) are not counted. t folds them; they fold by themselves under 36 rows.\n\n\
The views (v, 1-4): schedules, misfire records, the audit of operator actions, runs; the newest 200 of each, read while shown, filtered by /.\n\n\
The cursor stays on the first row whatever comes to the top until it is moved; then it follows its trigger; g follows the head again.",
                    listed(crate::tui::draw::COLUMNS)
                ),
            ),
        ],
        _ => Vec::new(),
    }
}
