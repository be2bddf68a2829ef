//! The prose of the man pages that clap cannot derive: exit statuses, environment, examples, and
//! the JSON wire format of each subcommand. JSON shapes are stable: fields are only ever added.

pub const EXIT_STATUS: &str = "\
The same for every subcommand:

  0   success
  1   unexpected error
  2   usage error (bad flag or argument, such as a malformed PROJECT/TRIGGER, a negative or non-numeric --version, a bad duration or an unknown --state; a destructive action without --yes and without a terminal; `demo --database` naming a database no demo made)
  3   fence rejected: the claim named no longer holds (other owner, newer version, expired)
  4   not found
  5   nothing eligible (no due, unclaimed row; a named row that is not eligible, or holds no claim to expire)
  65  bad input data (manifest, cron expression, time zone, a malformed claim token or run id)
  69  database unavailable (including no answer within connect_timeout, and no TLS where sslmode requires it; also: the throw-away server of `demo --embedded` failed to start)
  75  transient conflict, retries exhausted
  77  permission denied by the database role, a login refused (password, client certificate), or the server's TLS certificate refused
  78  schema not ready or configuration invalid (also: `demo --embedded` finds no initdb and pg_ctl of PostgreSQL 15 or newer, or runs as root with no system user postgres to run the server as)
  130 interrupted: `bench` stopped by SIGINT or SIGTERM (its scratch database dropped unless --keep); a second Ctrl-C while the interactive `claim` waits on a stalled database step (a claim already taken expires with its lease)

A closed standard output (qlsched ... | head) ends the command quietly with status 0.";

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

PGSERVICE
Connection service files are not supported: set, it is refused with exit 78.

QLSCHED_SCHEMA
The schema that holds the qlsched tables (default qlsched), as --schema.

QLSCHED_OWNER
The claim owner of qlsched run, as --owner.

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
qlsched-migrate(1), qlsched-publish(1), qlsched-run(1), qlsched-claim(1), qlsched-inspect(1), qlsched-expire(1), qlsched-top(1), qlsched-demo(1), qlsched-bench(1). The operator's guide: docs/OPERATIONS.md. The design: docs/DESIGN.md in the source repository.";

pub fn examples(command: &str) -> &'static str {
    match command {
        "migrate" => {
            "\
Create or upgrade the schema:
  qlsched -D postgres://admin@db/prod migrate

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
  qlsched top --readonly --refresh 5s

In a stuck-claim investigation: select the row marked !, Enter shows why it is not firing, e shows
its fence and expires exactly that claim after y (fenced and audited, as qlsched expire).

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
  qlsched claim --dry-run"
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
  qlsched inspect invariants"
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
        "bench" => {
            "\
The issue-5 figure: 10,000 due triggers, 4 replicas, as JSON:
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

/// The documented JSON wire format of a subcommand's `-o json`, if it prints data.
pub fn json_section(command: &str) -> Option<&'static str> {
    Some(match command {
        "migrate" => "\
migrate up: {\"schema\": string, \"version\": int, \"applied\": [migration]}.

migrate status: [migration], where migration is {\"version\": int, \"name\": string, \"state\": \"applied\"|\"pending\"|\"checksum_mismatch\"|\"unknown\", \"checksum\": sha256 hex, \"applied_at_ms\": int|null, \"execution_ms\": int|null}.

migrate verify: {\"schema\": string, \"ok\": bool, \"findings\": [{\"kind\": \"checksum\"|\"pending\"|\"unknown_migration\"|\"missing_grant\"|\"extra_grant\"|\"schema_usage\"|\"role\", \"message\": string}]}.",
        "publish" => "\
{\"dry_run\": bool, \"items\": [{\"kind\": \"project\"|\"task\"|\"trigger\", \"name\": \"PROJECT\" or \"PROJECT/ID\", \"change\": \"created\"|\"changed\"|\"unchanged\", \"revision\": int|null}]}.",
        "claim" => "\
claim: {\"dry_run\": bool, \"project_id\": string, \"trigger_id\": string, \"fence\": fence, \"observed_at_ms\": int (database time of the claim, the decision's now), \"cursor_ms\": int|null, \"decision\": decision, \"step\": \"admitted\"|\"advanced\"|\"held\"|\"released\"|\"dry_run\", \"run\": run|null}.

claim admit: {\"project_id\": string, \"trigger_id\": string, \"decision\": decision, \"step\": \"admitted\"|\"advanced\"|\"released\"|\"dry_run\", \"run\": run|null}. A manual admission: on a terminal it shows the decision and asks; without one it needs --yes; --dry-run shows the decision and admits nothing.

claim release: {\"project_id\": string, \"trigger_id\": string, \"fence\": fence (as it was), \"step\": \"released\"}.

fence is {\"owner\": string, \"token\": uuid, \"version\": int, \"expires_at_ms\": int}. decision is {\"kind\": \"initialize\"|\"fire\"|\"skip\"|\"not_due\", \"next_fire_at_ms\": int, \"scheduled_for_ms\": int|null, \"idempotency_key\": string|null, \"late_ms\": int|null, \"misfired\": bool|null, \"passed_over\": {\"first_ms\": int, \"last_ms\": int, \"count\": int, \"count_exact\": bool, \"reason\": \"beyond_grace\"}|null}. run is {\"run_id\": uuid, \"attempt_id\": uuid, \"idempotency_key\": string, \"scheduled_for_ms\": int}.",
        "inspect" => "\
inspect: {\"schema_version\": int, \"now_ms\": int, \"schedules\": {\"total\", \"due\", \"claimed\", \"expired_claim\", \"not_due\", \"disabled\", \"uninitialized\": int}, \"owners\": [{\"owner\": string, \"claims\": int, \"expired\": int, \"last_claim_at_ms\": int, \"admissions_last_minute\": int}], \"oldest_overdue\": {\"project_id\", \"trigger_id\": string, \"next_fire_at_ms\", \"lag_ms\": int}|null, \"admissions_last_minute\": int, \"schema_problem\": string|null (why `run` would refuse the schema; then the exit status is 78)}.

inspect schedules: [{\"project_id\", \"trigger_id\": string, \"state\": \"disabled\"|\"claimed\"|\"expired_claim\"|\"uninitialized\"|\"due\"|\"not_due\", \"trigger_revision\", \"state_version\", \"claim_version\": int, \"next_fire_at_ms\", \"due_in_ms\", \"last_scheduled_at_ms\": int|null, \"claim_owner\": string|null, \"claim_expires_at_ms\": int|null, \"updated_at_ms\": int}].

inspect claims: [claim], where claim is {\"project_id\", \"trigger_id\", \"owner\": string, \"token\": uuid, \"version\", \"acquired_at_ms\", \"expires_at_ms\", \"remaining_ms\" (negative once expired): int, \"expired\": bool}.

inspect runs: [run], where run is {\"run_id\": uuid, \"project_id\", \"trigger_id\": string, \"trigger_revision\": int, \"task_id\": string, \"task_revision\": int, \"execution_revision_id\": uuid, \"idempotency_key\", \"status\": string, \"scheduled_for_ms\", \"created_at_ms\": int, \"queued_at_ms\": int|null}.

inspect run: {\"run\": run, \"attempts\": [{\"attempt_id\": uuid, \"attempt_no\": int, \"executor\", \"state\": string, \"worker_id\", \"session_id\", \"lease_id\": string|null, \"started_at_ms\": int|null, \"created_at_ms\": int}], \"events\": [{\"seq\": int, \"type\": string, \"at_ms\": int, \"payload\": object}]}.

inspect trigger: {\"project_id\", \"trigger_id\": string, \"why_not_firing\": {\"cause\": \"schema_not_ready\"|\"project_suspended\"|\"trigger_disabled\"|\"revision_behind\"|\"digest_corrupt\"|\"claim_held\"|\"claim_expired\"|\"not_initialized\"|\"not_due\"|\"eligible\", and the cause's fields: detail; schedule_revision, trigger_revision; execution_revision_id; owner, remaining_ms; owner, expired_ms_ago; next_fire_at_ms, due_in_ms}, and unless the schema is not ready: \"now_ms\": int, \"definition\": {\"project_status\", \"task_id\": string, \"revision\": int, \"enabled\": bool, \"cron_expr\", \"time_zone\", \"misfire_policy\": string, \"misfire_grace_ms\": int, \"content_digest\": string, \"execution_revision_id\": uuid}, \"schedule\": schedule (as in inspect schedules), \"claim\": claim|null, \"recent_runs\": [run], \"recent_misfires\": [misfire], \"audit\": [audit]}.

inspect recovery: {\"pristine\": int, \"drifted\": int, \"candidates\" (oldest run first): [{\"run_id\": uuid, \"project_id\", \"trigger_id\", \"run_status\": string, \"attempt_id\": uuid|null, \"attempt_no\": int|null, \"attempt_state\": string|null, \"drift\": [string]}]}.

inspect audit: [audit], where audit is {\"audit_id\": int, \"project_id\", \"trigger_id\": string, \"action\": \"claim\"|\"admit\"|\"release\"|\"expire\", \"actor\", \"db_user\": string, \"reason\": string|null, \"at_ms\": int, \"fence_before\", \"fence_after\": fence|null}; a cleared fence has null owner, token and expires_at_ms.

inspect misfires: [misfire], newest first, where misfire is {\"misfire_id\": int, \"project_id\", \"trigger_id\": string, \"trigger_revision\": int, \"first_occurrence_ms\", \"last_occurrence_ms\": int (the first and last occurrence passed over), \"occurrences\": int (how many, both included), \"occurrences_exact\": bool (false: counting stopped at 10000 and occurrences is a lower bound), \"policy\": \"skip\"|\"fire_once\", \"reason\": \"beyond_grace\", \"owner\": string (the replica or operator whose decision it was), \"decided_at_ms\", \"recorded_at_ms\": int}. Records are kept 7 days.

inspect invariants: {\"ok\": bool, \"counts\": {\"runs\", \"duplicate_occurrences\", \"runs_without_one_attempt\", \"runs_without_two_events\", \"orphans\", \"half_written_claims\", \"cursors_behind\", \"claims_held\": int}, \"accounting\": {\"since_ms\": int (the window's start), \"triggers\", \"occurrences\" (checked), \"gap_count\", \"duplicate_count\": int, \"gaps\", \"duplicates\": [{\"project_id\", \"trigger_id\": string, \"trigger_revision\", \"occurrence_ms\": int}] (at most 100 each), \"truncated\": [\"PROJECT/TRIGGER\"] (more than a million occurrences in the window: checked up to there)}, \"failures\": [string], \"grants\": [finding as in migrate verify]}. A gap is an occurrence between the later of the window's start and the revision's first cursor, and the cursor, with neither a run nor a misfire record.",
        "expire" => "\
{\"dry_run\": bool, \"expired\": [{\"project_id\", \"trigger_id\": string, \"fence_before\": fence, \"claim_version\": int, \"state_version\": int}]}, the versions as they are after the expiry. An owner with no claims gives an empty list (exit 0); a named row without a claim exits 5.",
        "bench" => "\
One object. Configuration: \"triggers\" (published), \"due\" (of them, due at once), \"rows_total\" (schedule rows, padding included), \"replicas\", \"batch\".

Throughput: \"admitted\" (runs admitted while measuring), \"complete\" (every due occurrence admitted before the cap), \"elapsed_s\" (first round's start to the end of the last round that admitted), \"admissions_per_s\" (admitted / elapsed_s), \"commit_ceiling_per_s\" (single-row INSERT transactions per second with as many connections as replicas, probed before the replicas start), \"ratio\" (admissions_per_s / commit_ceiling_per_s).

Latency, nearest-rank percentiles over rounds, in milliseconds: \"claim_p50_ms\", \"claim_p99_ms\" (the claim statement, every round), \"admit_p50_ms\", \"admit_p99_ms\" (the round's whole admission, retries and fallbacks included, rounds that claimed anything).

Work: \"rounds\", \"failed_rounds\", \"transactions\" (admission transactions, retries included), \"serialization_retries\", \"serialization_retry_rate\" (per admission), \"batch_fallbacks\" (batches admitted row by row after failing whole), \"fence_lost\", \"rejected\" (admissions the database refused: a constraint or consistency check), \"unsettled\" (rows of such batches whose own admission could not be settled either: serialization failures outlasted the retries, or the database went away; their claims are given back), \"round_trips\" (exchanges with the server the rounds waited on: claim 1, each admission transaction 1, a release 2, each first-time statement preparation on a connection 1), \"round_trips_per_admission\".

Checks on the database afterwards: \"runs\", \"duplicates\" (occurrences admitted more than once), \"runs_without_one_attempt\", \"runs_without_two_events\", \"orphans\" (attempts or events without their run).

Other: \"seed_s\" (creating, migrating, publishing and padding), \"database\" (the scratch database's name), \"kept\".

With --steady, one object of another shape: \"mode\": \"steady\", \"triggers\", \"replicas\", \"batch\", \"cadence_ms\", \"cron\"; \"occurrences\": [lag] (every occurrence of the window, oldest first), \"overall\": lag|null (over every run of the window), where lag is {\"scheduled_for_ms\", \"runs\", \"lag_p50_ms\", \"lag_p99_ms\", \"lag_max_ms\": int} and a run's lag is created_at_ms - scheduled_for_ms in database time; \"short_occurrences\" (occurrences with fewer runs than triggers), \"runs\", \"duplicates\", \"misfire_records\", \"unaccounted\" (occurrences with neither a run nor a misfire record), \"runs_without_one_attempt\", \"runs_without_two_events\", \"seed_s\", \"database\", \"kept\". Any of those counts above 0 exits 1 after the report.",
        _ => return None,
    })
}
