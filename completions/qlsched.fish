# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_qlsched_global_optspecs
    string join \n D/database-url= schema= pooler= o/output= color= log-format= h/help V/version
end

function __fish_qlsched_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_qlsched_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_qlsched_using_subcommand
    set -l cmd (__fish_qlsched_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c qlsched -n "__fish_qlsched_needs_command" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_needs_command" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_needs_command" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_needs_command" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_needs_command" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_needs_command" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_needs_command" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "migrate" -d 'Create or upgrade the schema, show its migrations, or verify checksums and grants'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "publish" -d 'Publish projects, tasks and triggers from a JSON manifest'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "run" -d 'Run a scheduler replica until SIGINT or SIGTERM'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "claim" -d 'Step through the scheduler by hand: claim a row, see its fence and decision, then admit, hold or release it'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "cron" -d 'List when a cron expression fires, in its zone and UTC, offline: validated as publish does, with the occurrences a daylight-saving gap moved or a fold repeats marked'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "inspect" -d 'Read-only views: summary, schedules, claims, runs, a trigger and why it is not firing'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "expire" -d 'Expire a stuck claim (fenced and audited), or every claim of a dead replica'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "fire" -d 'Admit one manual run of a trigger now (idempotent by --request-id); the cursor stays'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "backfill" -d 'Admit a trigger\'s past cron occurrences in a window that have no run, exactly once'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "pause" -d 'Pause a trigger (or every trigger of a project) at once, apart from the manifest\'s enabled: a claim in flight is voided, replicas skip it, publish leaves it paused'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "resume" -d 'Resume a paused trigger: what passed meanwhile is one misfire record, the cursor moves to the first occurrence at or after now'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "top" -d 'Watch replicas, claims, leases and admissions live in the terminal; expire a stuck claim, pause or resume a trigger'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "demo" -d 'Show qlsched at work: a fresh demo database, three replicas, live admissions'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "bench" -d 'Measure admission throughput against the database\'s commit ceiling, in a scratch database'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "generate" -d 'Write shell completions and man pages generated from these definitions'
complete -c qlsched -n "__fish_qlsched_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -f -a "up" -d 'Apply every pending migration (the default). Safe to run from several places at once'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -f -a "status" -d 'List the migrations this binary carries and what the database has applied, whether replicas of the previous release may run beside each, what is pending, and which running replicas (from the registry) would have to stop for it'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -f -a "verify" -d 'Compare checksums and each role\'s grants with what it must hold; exit 78 on any difference'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and not __fish_seen_subcommand_from up status verify help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from up" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from verify" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from help" -f -a "up" -d 'Apply every pending migration (the default). Safe to run from several places at once'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from help" -f -a "status" -d 'List the migrations this binary carries and what the database has applied, whether replicas of the previous release may run beside each, what is pending, and which running replicas (from the registry) would have to stop for it'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from help" -f -a "verify" -d 'Compare checksums and each role\'s grants with what it must hold; exit 78 on any difference'
complete -c qlsched -n "__fish_qlsched_using_subcommand migrate; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -s f -l file -d 'The JSON manifest to publish, or `-` for standard input' -r -F
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -l dry-run -d 'Validate and diff against the database, report, and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand publish" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l owner -d 'Claim owner written into every lease, 1 to 200 characters [default: HOSTNAME:PID]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l batch -d 'Claims per round, pinned (1..=256) [default: adaptive, 16..=256, following the backlog]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l lease -d 'Lease of each claim, in database time (1s..=1h)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l cadence -d 'Time from the start of one round to the start of the next (10ms..=1h)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l drain-timeout -d 'How long a stop waits for the round in flight before releasing its claims (0s..=10m)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l metrics-addr -d 'Serve /metrics (Prometheus text format), /healthz and /readyz on HOST:PORT over plain HTTP [default: off]. Bound before the database is opened (exit 78 if it cannot be)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l retain-succeeded -d 'Keep a succeeded run this long after it finished, or `off` to keep succeeded runs for ever' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l retain-failed -d 'Keep a failed run this long after it finished (long enough for someone to look into it after a weekend), or `off`' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l retain-cancelled -d 'Keep a cancelled run this long after it finished, or `off`' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l retention-interval -d 'Time between two retention passes of this replica (1s..=1h); each drains what is due in batches for at most 30 s, and only the replica holding the retention lease deletes' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l forget-stale-after -d 'How long after its last heartbeat a replica that never stopped (killed, its host lost) leaves the registry: `inspect replicas`, `top` and the qlsched_replicas metric stop showing it, and the replicas\' housekeeping deletes its row. Recorded with this replica\'s registration, so its own bound applies when it dies (1m..=7d, more than --lease plus --cadence)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -l exit-if-unmigrated -d 'Exit 78 at start when the schema is not migrated (no ledger, or migrations pending) instead of waiting, not ready, until `qlsched migrate` has run'
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand run" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l owner -d 'Claim owner written into the lease [default: USER@HOST:manual]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l lease -d 'Lease of the claim, in database time (1s..=1h)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l wait -d 'While the row is not claimable (not due, or claimed), try again until it is or this much time has passed (then exit 5), instead of failing at once' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l hold -d 'Keep the claim and exit: the row stays claimed until it expires or is expired'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -l release -d 'Give the claim back at once'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -a "admit" -d 'Admit a claimed row\'s occurrence under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -a "release" -d 'Give a claimed row back under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and not __fish_seen_subcommand_from admit release help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l token -d 'The claim token `qlsched claim` printed (a UUID)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l version -d 'The claim version `qlsched claim` printed with the token' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from admit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l token -d 'The claim token `qlsched claim` printed (a UUID)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l version -d 'The claim version `qlsched claim` printed with the token' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from release" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from help" -f -a "admit" -d 'Admit a claimed row\'s occurrence under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from help" -f -a "release" -d 'Give a claimed row back under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand claim; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s z -l time-zone -d 'The IANA time zone to evaluate it in, as a manifest\'s `time_zone`' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s n -l count -d 'How many occurrences to list (1 to 1000). An expression with fewer occurrences left before the year 10000 lists those, says so on stderr and exits 0' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -l from -d 'List the occurrences at or after this instant (RFC 3339, such as 2026-03-29T00:00:00Z, epoch milliseconds, from 0001-01-01 to 9999-12-31 UTC; or relative to this machine\'s clock: now, now-2h, -2h, now+1d) [default: now]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand cron" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -l check -d 'Only whether there is an outage (no live replica with rows due, rows overdue beyond their misfire grace, or admissions stopped while rows are due): its headline, likely cause and next command, and exit 7; one line and exit 0 when there is none. For scripts and probes'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "schedules" -d 'Schedule rows, most urgent first (claim order)'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "claims" -d 'Claims held, by owner, with the lease left in database time'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "runs" -d 'Admitted runs, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "run" -d 'One run with its attempt and events'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "trigger" -d 'A trigger\'s definition, cursor, claim, recent runs and audit, and why it is not firing'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "recovery" -d 'Queued runs left to the dispatcher (pristine) and drifted ones (recovery candidates)'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "audit" -d 'Operator actions on schedule rows, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "replicas" -d 'Registered replicas: live, stalled (no heartbeat for two cadences), stale (none for lease + cadence), stopped'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "misfires" -d 'Misfire records: occurrences passed over beyond their grace, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "load" -d 'The load ahead: the instants with the most occurrences due together over the horizon, each with the time to admit it at the rate these replicas reached in their busiest minute of the last hour, and the daylight-saving changes that move occurrences'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "invariants" -d 'Check what the scheduler promises (one run per occurrence, every occurrence a run or inside a misfire record, attempts, events, claims) and the grants; exit 1 listing every failure'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and not __fish_seen_subcommand_from schedules claims runs run trigger recovery audit replicas misfires load invariants help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l project -d 'Only rows of this project' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l state -d 'Only rows in this state (`paused`: rows an operator paused, whatever else holds)' -r -f -a "paused\t''
disabled\t''
claimed\t''
expired_claim\t''
uninitialized\t''
due\t''
not_due\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l owner -d 'Only rows claimed by this owner' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l limit -d 'At most this many rows' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from schedules" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l owner -d 'Only claims of this owner' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l limit -d 'At most this many claims' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -l expired -d 'Only claims past their lease that nobody took over'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from claims" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l trigger -d 'Only runs of this trigger' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l since -d 'Only runs created within this long (10m; -10m and now-10m say the same)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l limit -d 'At most this many runs' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from runs" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from trigger" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -l limit -d 'At most this many candidates listed, oldest run first' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from recovery" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l trigger -d 'Only actions on this trigger' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l limit -d 'At most this many audit rows' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from audit" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from replicas" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l trigger -d 'Only records of this trigger' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l since -d 'Only records written within this long (1h; -1h and now-1h say the same)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l limit -d 'At most this many records' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from misfires" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l horizon -d 'How far ahead to look (at most 7d)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l from -d 'Where to start looking: RFC 3339, epoch milliseconds, or relative to the database\'s now (now+1d, +6h)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l limit -d 'At most this many boundaries, the most occurrences first' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from load" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -l since -d 'How far back occurrences are accounted for (at most the 7-day retention of misfire records)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from invariants" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "schedules" -d 'Schedule rows, most urgent first (claim order)'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "claims" -d 'Claims held, by owner, with the lease left in database time'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "runs" -d 'Admitted runs, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "run" -d 'One run with its attempt and events'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "trigger" -d 'A trigger\'s definition, cursor, claim, recent runs and audit, and why it is not firing'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "recovery" -d 'Queued runs left to the dispatcher (pristine) and drifted ones (recovery candidates)'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "audit" -d 'Operator actions on schedule rows, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "replicas" -d 'Registered replicas: live, stalled (no heartbeat for two cadences), stale (none for lease + cadence), stopped'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "misfires" -d 'Misfire records: occurrences passed over beyond their grace, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "load" -d 'The load ahead: the instants with the most occurrences due together over the horizon, each with the time to admit it at the rate these replicas reached in their busiest minute of the last hour, and the daylight-saving changes that move occurrences'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "invariants" -d 'Check what the scheduler promises (one run per occurrence, every occurrence a run or inside a misfire record, attempts, events, claims) and the grants; exit 1 listing every failure'
complete -c qlsched -n "__fish_qlsched_using_subcommand inspect; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l token -d 'Expire only the claim with this token (exit 3 if it changed in between)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l version -d 'The claim version that goes with --token' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l owner -d 'Expire every claim of this owner (a replica known to be dead), in one transaction' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l reason -d 'Why, for the audit row' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l expired-only -d 'With --owner: only the claims already past their lease'
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand expire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l request-id -d 'Makes the request idempotent: the same id again reports the run it admitted (1 to 128 of A-Z a-z 0-9 _ . : -) [default: a new UUID]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand fire" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l from -d 'The window\'s first instant, included: RFC 3339, epoch milliseconds, or relative to the database\'s now (now-2h, -2h)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l since -d 'The window as a look-back from the database\'s now (2h; -2h and now-2h say the same): --from now-2h' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l to -d 'The window\'s last instant, included; must be before the database\'s now (`now`: the last millisecond before it)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l max -d 'Refuse (exit 65, nothing written) a window with more occurrences than this' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l before-creation -d 'Admit the window\'s occurrences from before the trigger was first published too; without it they are left out, and the report counts them'
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand backfill" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l project -d 'Every trigger of this project instead' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l reason -d 'Why, for the audit trail and `inspect trigger`' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand pause" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l project -d 'Every trigger of this project instead' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -s y -l yes -d 'Do it without asking (required when stdin is not a terminal)'
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -l dry-run -d 'Show what would change and change nothing'
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand resume" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l refresh -d 'Time between refreshes, 250ms to 10s (`+` and `-` change it live)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l columns -d 'The schedules table\'s columns to show, comma-separated, of: mark (the `!` of an expired claim), trigger (always shown), state, next, lag, owner, lease, c.v, s.v, mis. Default: all (`c` chooses them live)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -l read-only -l readonly -d 'Disable `e`, `E` (expire) and `p` (pause, resume): look, never touch. For people who must not write, whatever their login may do'
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand top" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l duration -d 'Stop by itself after this long (default: run until Ctrl-C)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l database -d 'The database to (re)create for the demo, on the server the connection settings name. An existing database is dropped only if an earlier demo made it (or it is `qlsched_demo`)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l replicas -d 'Number of in-process replicas' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l postgres-bin -d 'Directory holding initdb and pg_ctl (PostgreSQL 15 or newer) for the throw-away server [default: the first of PATH, /usr/lib/postgresql/<major>/bin and the other usual install locations that has both, newest major first]' -r -F
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -l embedded -d 'Run on a throw-away PostgreSQL of its own: a cluster initialised in a temporary directory (trust authentication, listening only on a unix socket there), stopped and deleted when the demo ends, by Ctrl-C, SIGTERM or a panic too. As root the server runs as the system user `postgres`. Without any connection setting, the demo does the same unasked when nothing answers at libpq\'s default'
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand demo" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l triggers -d 'Triggers to publish (through the real publish path)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l replicas -d 'In-process replicas, each with a pool of its own, as `qlsched run` starts one' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l batch -d 'Claims per round of every replica, pinned (1..=256) [default: adaptive, as `qlsched run`]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l due-fraction -d 'Fraction of the triggers whose occurrence is due at once (0..=1); the rest are not due' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l rows-total -d 'Schedule rows in all: the triggers, plus rows that are never due [default: --triggers]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l duration -d 'Stop measuring after this long even if occurrences are still due (exit 1); at least 1s' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l ceiling-time -d 'How long the commit ceiling is probed (100ms..=10m)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l cadence -d 'Time from the start of one round to the next for rounds that did not fill their budget; also the window the replicas\' random start phases fall in [default: 100ms; with --steady, 1s as `qlsched run`]' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l lease -d 'Lease of each claim, in database time' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l parked -d 'Parked schedule rows besides the triggers, as a lived-in table holds them: a third of disabled triggers, a third paused, a third in a suspended project' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l history -d 'Runs already in the history, each with its attempt and two events, created before the bench (the newest two hours before it)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l cron -d 'With --steady: every trigger\'s cron expression (UTC)' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l window -d 'With --steady: the span of occurrences measured, from the first one after every trigger has its first cursor' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l retain -d 'With --steady: delete finished runs this long after they finished, as `qlsched run` does (a pass a minute by the replica holding the lease); implies --dispatch' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l chart -d 'With --steady: also write an SVG chart of the lag of each occurrence (p50, p99, max) and its admissions a second to this file, beside the report' -r -F
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l keep -d 'Keep the scratch database afterwards (its name is in the report)'
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l steady -d 'Measure the steady state instead of a burst: from a plain publish, replicas at `qlsched run`\'s defaults, the lag of every occurrence in --window'
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -l dispatch -d 'With --steady: a dispatcher beside the replicas finishes every queued run each second (status `succeeded`, as docs/DESIGN.md §3.4 says a dispatcher does), reading each run\'s lag as it does, and the history\'s size is sampled every ten seconds'
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand bench" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -l out-dir -d 'Folder to write `completions/` and `man/` into' -r -F
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -s D -l database-url -d 'PostgreSQL URL or key=value string, with libpq\'s settings (sslmode, sslrootcert, sslcert, sslkey, passfile, connect_timeout, several hosts with target_session_attrs: read-write for commands that write, any for those that read, unless given) [default: $QLSCHED_DATABASE_URL, $DATABASE_URL, the PG* variables, libpq\'s defaults]. A password in it is never printed' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -l schema -d 'Schema that holds the qlsched tables: 1 to 63 of a-z 0-9 _, starting with a letter or _, not pg_' -r
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -l pooler -d 'What sits between qlsched and PostgreSQL: none, a pooler in session mode, or one in transaction mode (PgBouncer\'s pool_mode), where qlsched keeps nothing on a session and sends its replica\'s statements unnamed. migrate, demo and bench connect directly' -r -f -a "none\t''
session\t''
transaction\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -s o -l output -d 'Output format: tables for people, JSON (stable, documented in the man pages) for scripts' -r -f -a "table\t''
json\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -l color -d 'When to use colour [NO_COLOR is honoured under auto]' -r -f -a "auto\t''
always\t''
never\t''"
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -l log-format -d 'Log format on stderr: text for people, json for a log pipeline (one object per line)' -r -f -a "text\t'One human-readable line per event'
json\t'One JSON object per line: timestamp, level, message, target and the event\'s fields'"
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c qlsched -n "__fish_qlsched_using_subcommand generate" -s V -l version -d 'Print version'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "migrate" -d 'Create or upgrade the schema, show its migrations, or verify checksums and grants'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "publish" -d 'Publish projects, tasks and triggers from a JSON manifest'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "run" -d 'Run a scheduler replica until SIGINT or SIGTERM'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "claim" -d 'Step through the scheduler by hand: claim a row, see its fence and decision, then admit, hold or release it'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "cron" -d 'List when a cron expression fires, in its zone and UTC, offline: validated as publish does, with the occurrences a daylight-saving gap moved or a fold repeats marked'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "inspect" -d 'Read-only views: summary, schedules, claims, runs, a trigger and why it is not firing'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "expire" -d 'Expire a stuck claim (fenced and audited), or every claim of a dead replica'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "fire" -d 'Admit one manual run of a trigger now (idempotent by --request-id); the cursor stays'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "backfill" -d 'Admit a trigger\'s past cron occurrences in a window that have no run, exactly once'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "pause" -d 'Pause a trigger (or every trigger of a project) at once, apart from the manifest\'s enabled: a claim in flight is voided, replicas skip it, publish leaves it paused'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "resume" -d 'Resume a paused trigger: what passed meanwhile is one misfire record, the cursor moves to the first occurrence at or after now'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "top" -d 'Watch replicas, claims, leases and admissions live in the terminal; expire a stuck claim, pause or resume a trigger'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "demo" -d 'Show qlsched at work: a fresh demo database, three replicas, live admissions'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "bench" -d 'Measure admission throughput against the database\'s commit ceiling, in a scratch database'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "generate" -d 'Write shell completions and man pages generated from these definitions'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and not __fish_seen_subcommand_from migrate publish run claim cron inspect expire fire backfill pause resume top demo bench generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from migrate" -f -a "up" -d 'Apply every pending migration (the default). Safe to run from several places at once'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from migrate" -f -a "status" -d 'List the migrations this binary carries and what the database has applied, whether replicas of the previous release may run beside each, what is pending, and which running replicas (from the registry) would have to stop for it'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from migrate" -f -a "verify" -d 'Compare checksums and each role\'s grants with what it must hold; exit 78 on any difference'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from claim" -f -a "admit" -d 'Admit a claimed row\'s occurrence under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from claim" -f -a "release" -d 'Give a claimed row back under its fence; exit 3 when the fence no longer holds'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "schedules" -d 'Schedule rows, most urgent first (claim order)'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "claims" -d 'Claims held, by owner, with the lease left in database time'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "runs" -d 'Admitted runs, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "run" -d 'One run with its attempt and events'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "trigger" -d 'A trigger\'s definition, cursor, claim, recent runs and audit, and why it is not firing'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "recovery" -d 'Queued runs left to the dispatcher (pristine) and drifted ones (recovery candidates)'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "audit" -d 'Operator actions on schedule rows, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "replicas" -d 'Registered replicas: live, stalled (no heartbeat for two cadences), stale (none for lease + cadence), stopped'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "misfires" -d 'Misfire records: occurrences passed over beyond their grace, newest first'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "load" -d 'The load ahead: the instants with the most occurrences due together over the horizon, each with the time to admit it at the rate these replicas reached in their busiest minute of the last hour, and the daylight-saving changes that move occurrences'
complete -c qlsched -n "__fish_qlsched_using_subcommand help; and __fish_seen_subcommand_from inspect" -f -a "invariants" -d 'Check what the scheduler promises (one run per occurrence, every occurrence a run or inside a misfire record, attempts, events, claims) and the grants; exit 1 listing every failure'
