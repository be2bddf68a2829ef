//! Names the commit the binary is built from, for `qlsched --version` and the metrics' build
//! info: `QLSCHED_BUILD_COMMIT` when set (a CI or packaging step), else `git rev-parse` in the
//! checkout, else "unknown". Never fails the build: a tarball without git builds as well.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=QLSCHED_BUILD_COMMIT");
    let commit = std::env::var("QLSCHED_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| {
            // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs.
            for path in ["HEAD", "packed-refs"] {
                if let Some(path) = git(&["rev-parse", "--git-path", path]) {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
                && let Some(path) = git(&["rev-parse", "--git-path", &branch])
            {
                println!("cargo:rerun-if-changed={path}");
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=QLSCHED_COMMIT={commit}");
}
