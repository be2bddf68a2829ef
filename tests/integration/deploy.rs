//! The deployment examples in deploy/ say what the binary does: the flags they pass exist, the
//! probes name the endpoints and the port `--metrics-addr` listens on, and every stop limit
//! leaves room above the longest a stop takes (`qlsched::lifecycle::stop_bound` of the drain
//! timeout they pass), the figure they and docs/OPERATIONS.md state. `.ci/run` also runs
//! `systemd-analyze verify` on the unit.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::bin;

fn read(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The one YAML document in `path` (YAML 1.2 and its core schema, as a Kubernetes API server
/// reads it: `"9726"` a string, `9726` a number, a key twice an error), as a JSON value, whose
/// indexing gives null for a key that is not there.
fn yaml(path: &str) -> Value {
    use saphyr::LoadableYamlNode;
    let documents = saphyr::Yaml::load_from_str(&read(path))
        .unwrap_or_else(|e| panic!("{path} is not YAML: {e}"));
    let [document] = documents.as_slice() else {
        panic!("{path}: {} YAML documents, expected one", documents.len());
    };
    json(path, document)
}

/// A YAML node as JSON: the manifests use nothing JSON cannot say (no anchor, alias or tag).
fn json(path: &str, node: &saphyr::Yaml) -> Value {
    use saphyr::{Scalar, Yaml};
    match node {
        Yaml::Value(Scalar::Null) => Value::Null,
        Yaml::Value(Scalar::Boolean(b)) => Value::Bool(*b),
        Yaml::Value(Scalar::Integer(i)) => Value::from(*i),
        Yaml::Value(Scalar::FloatingPoint(f)) => Value::from(f.into_inner()),
        Yaml::Value(Scalar::String(s)) => Value::from(s.as_ref()),
        Yaml::Sequence(items) => items.iter().map(|item| json(path, item)).collect(),
        Yaml::Mapping(entries) => entries
            .iter()
            .map(|(key, value)| {
                let key = key
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: a key that is not a string: {key:?}"));
                (key.to_owned(), json(path, value))
            })
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => panic!("{path}: {other:?} has no place in a manifest"),
    }
}

/// `--drain-timeout` in an argument list, as `run` reads it (10 s when absent).
fn drain_timeout(args: &[String]) -> Duration {
    args.iter()
        .position(|a| a == "--drain-timeout")
        .and_then(|i| args.get(i + 1))
        .map_or(Duration::from_secs(10), |d| {
            qlsched::core::duration::parse_duration(d).expect("a drain timeout")
        })
}

/// The longest a stop of `run ARGS` takes, as the documents write it ("14 s"), after checking
/// that `text` (a deployment example) states it and that docs/OPERATIONS.md does too.
fn stated_stop_bound(args: &[String], text: &str, what: &str) -> Duration {
    let bound = qlsched::lifecycle::stop_bound(drain_timeout(args));
    let figure = format!("{} s", bound.as_secs());
    assert!(
        text.contains(&figure),
        "{what} does not state the stop bound {figure}"
    );
    let operations = read("docs/OPERATIONS.md");
    assert!(
        operations.contains(&format!(
            "**{figure}** with the default `--drain-timeout {}s`",
            drain_timeout(&[]).as_secs()
        )),
        "docs/OPERATIONS.md does not state the stop bound {figure}"
    );
    bound
}

/// The arguments are ones `qlsched` accepts: with no database reachable it gets as far as
/// connecting (exit 69), not a usage error (exit 2) or a configuration error (exit 78).
fn assert_accepted(args: &[String], env: &[(&str, &str)]) {
    let output = std::process::Command::new(bin())
        .args(["-D", "postgres://nobody@127.0.0.1:1/none"])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("qlsched");
    assert_eq!(output.status.code(), Some(69), "{args:?}: {output:?}");
}

/// The port of a `HOST:PORT` address.
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{addr} has no port"))
}

#[test]
fn the_kubernetes_manifests_probe_the_right_paths_and_port_and_outlast_a_stop() {
    let deployment = yaml("deploy/kubernetes/deployment.yaml");
    let pdb = yaml("deploy/kubernetes/poddisruptionbudget.yaml");
    let secret = yaml("deploy/kubernetes/secret.yaml");
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(pdb["kind"], "PodDisruptionBudget");
    assert_eq!(secret["kind"], "Secret");
    assert!(deployment["spec"]["replicas"].as_u64().unwrap_or(0) >= 2);

    let pod = &deployment["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let env: BTreeMap<String, String> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_owned(),
                e["value"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let addr = &env["QLSCHED_METRICS_ADDR"];
    let port = port_of(addr);
    assert_eq!(env["QLSCHED_LOG_FORMAT"], "json");
    let ports = container["ports"].as_array().expect("ports");
    let named = ports
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("a port named metrics");
    assert_eq!(named["containerPort"].as_u64(), Some(u64::from(port)));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(get["port"] == "metrics" || get["port"].as_u64() == Some(u64::from(port)));
        // /readyz may wait 2 s on the database: the probe must wait longer.
        assert!(
            container[probe]["timeoutSeconds"].as_u64().unwrap_or(1) > 2,
            "{probe}"
        );
    }
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], port.to_string().as_str());
    assert_eq!(annotations["prometheus.io/path"], "/metrics");

    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("run"));
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace");
    let bound = stated_stop_bound(
        &args,
        &read("deploy/kubernetes/deployment.yaml"),
        "the Deployment",
    );
    assert!(
        Duration::from_secs(grace) > bound,
        "terminationGracePeriodSeconds {grace} does not outlast a stop ({bound:?})"
    );
    // Bind on a free loopback port rather than the manifest's, which may be taken here.
    assert_accepted(
        &args,
        &[
            ("QLSCHED_METRICS_ADDR", "127.0.0.1:0"),
            ("QLSCHED_LOG_FORMAT", "json"),
        ],
    );

    // The Secret holds the URL under the name the binary reads, and the pods take it from there.
    let key = "QLSCHED_DATABASE_URL";
    assert!(
        secret["stringData"][key]
            .as_str()
            .is_some_and(|u| u.starts_with("postgres"))
    );
    let from = container["envFrom"][0]["secretRef"]["name"].as_str();
    assert_eq!(from, secret["metadata"]["name"].as_str());
    // The budget covers these pods.
    let labels = &pod["metadata"]["labels"];
    let selector = pdb["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("selector");
    for (key, value) in selector {
        assert_eq!(&labels[key], value);
    }
    assert_eq!(
        &deployment["spec"]["selector"]["matchLabels"],
        &pdb["spec"]["selector"]["matchLabels"]
    );
}

/// The Kubernetes example runs the image deploy/container/Containerfile builds: the manifest
/// names this release's version as the tag (the Containerfile's documented command tags it
/// alike), the recipe installs the Debian package and runs `qlsched` as the user the manifest's
/// securityContext gives, and that package's build script exists.
#[test]
fn the_kubernetes_manifest_names_the_image_the_container_recipe_builds() {
    let deployment = yaml("deploy/kubernetes/deployment.yaml");
    let pod = &deployment["spec"]["template"]["spec"];
    let image = pod["containers"][0]["image"].as_str().expect("an image");
    let version = env!("CARGO_PKG_VERSION");
    let (name, tag) = image.rsplit_once(':').expect("a tagged image");
    assert_eq!(tag, version, "the manifest runs this release's image");
    assert!(
        read("deploy/kubernetes/deployment.yaml").contains("deploy/container/Containerfile"),
        "the manifest says which recipe builds its image"
    );
    let recipe = read("deploy/container/Containerfile");
    assert!(recipe.contains(&format!("-t {name}:{version}")), "{recipe}");
    assert!(recipe.contains("packaging/deb/build"), "{recipe}");
    assert!(recipe.contains("apt-get install") && recipe.contains("/tmp/qlsched.deb"));
    let user = format!(
        "USER {}:{}",
        pod["securityContext"]["runAsUser"]
            .as_u64()
            .expect("runAsUser"),
        pod["securityContext"]["runAsGroup"]
            .as_u64()
            .expect("runAsGroup")
    );
    assert!(recipe.lines().any(|line| line == user), "{user}: {recipe}");
    assert!(
        recipe.contains("ENTRYPOINT [\"/usr/bin/qlsched\"]"),
        "{recipe}"
    );
    assert!(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging/deb/build")
            .is_file()
    );
}

#[test]
fn the_systemd_unit_stops_by_sigterm_after_the_drain_and_runs_hardened() {
    let unit = read("deploy/systemd/qlsched.service");
    let mut keys: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in unit.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value: {line}"));
        keys.entry(format!("{section}.{key}"))
            .or_default()
            .push(value.to_owned());
    }
    let one = |key: &str| -> &str {
        keys.get(key)
            .and_then(|v| v.last())
            .unwrap_or_else(|| panic!("no {key}"))
    };
    assert_eq!(one("Service.Type"), "exec");
    assert_eq!(one("Service.KillSignal"), "SIGTERM");
    let exec: Vec<String> = one("Service.ExecStart")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(
        exec[0].ends_with("/qlsched") && exec[1] == "run",
        "{exec:?}"
    );
    let stop = qlsched::core::duration::parse_duration(one("Service.TimeoutStopSec"))
        .expect("TimeoutStopSec");
    let bound = stated_stop_bound(&exec, &unit, "the systemd unit");
    assert!(
        stop > bound,
        "TimeoutStopSec {stop:?} does not outlast a stop ({bound:?})"
    );
    for hardening in [
        "NoNewPrivileges",
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "DynamicUser",
    ] {
        assert!(
            keys.contains_key(&format!("Service.{hardening}")),
            "no {hardening}"
        );
    }
    let environment = &keys["Service.Environment"];
    let addr = environment
        .iter()
        .find_map(|e| e.strip_prefix("QLSCHED_METRICS_ADDR="))
        .expect("a metrics address");
    port_of(addr);
    assert!(environment.iter().any(|e| e == "QLSCHED_LOG_FORMAT=json"));
    assert_accepted(&exec[1..], &[("QLSCHED_METRICS_ADDR", "127.0.0.1:0")]);
    assert_eq!(one("Install.WantedBy"), "multi-user.target");
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let version = std::process::Command::new(bin())
        .arg("--version")
        .output()
        .expect("qlsched --version");
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let expected = std::env::var("QLSCHED_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            let head = std::process::Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            Some(String::from_utf8_lossy(&head.stdout).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(
        version,
        format!("qlsched {} (commit {expected})", env!("CARGO_PKG_VERSION"))
    );
    // -V, and so the generated man pages, keep the bare version.
    let short = std::process::Command::new(bin())
        .arg("-V")
        .output()
        .expect("-V");
    assert_eq!(
        String::from_utf8_lossy(&short.stdout).trim(),
        format!("qlsched {}", env!("CARGO_PKG_VERSION"))
    );
}
