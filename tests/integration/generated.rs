//! The checked-in completions and man pages are exactly what the binary generates, and every
//! subcommand and flag has help text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::util::{code, qlsched, stderr};

const STALE: &str = "completions/ or man/ are stale: run `cargo run -- generate --out-dir .`";

#[test]
fn completions_and_man_pages_are_up_to_date() {
    let out = std::env::temp_dir().join(format!("qlsched-generate-{}", uuid::Uuid::new_v4()));
    let output = qlsched(
        None,
        &[
            "generate",
            "--out-dir",
            out.to_str().expect("utf-8 temp path"),
        ],
        None,
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for folder in ["completions", "man"] {
        let generated = files(&out.join(folder));
        let checked_in = files(&root.join(folder));
        assert_eq!(
            generated.keys().collect::<Vec<_>>(),
            checked_in.keys().collect::<Vec<_>>(),
            "{STALE}"
        );
        for (name, bytes) in &generated {
            assert!(
                checked_in[name] == *bytes,
                "{STALE} ({folder}/{name} differs)"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{STALE} ({}: {e})", dir.display()))
        .map(|entry| {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect()
}

#[test]
fn every_subcommand_and_flag_has_help_text() {
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let path = format!("{path} {}", command.get_name());
        if command.get_about().is_none() && !command.is_hide_set() {
            missing.push(format!("{path}: no about"));
        }
        for arg in command.get_arguments() {
            let builtin = ["help", "version"].contains(&arg.get_id().as_str());
            if arg.get_help().is_none() && !arg.is_hide_set() && !builtin {
                missing.push(format!("{path} --{}", arg.get_id()));
            }
        }
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, &path, missing);
        }
    }
    let mut missing = Vec::new();
    let mut root = qlsched::cli::command();
    root.build();
    for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
        walk(sub, "qlsched", &mut missing);
    }
    assert!(missing.is_empty(), "without help text: {missing:#?}");
}
