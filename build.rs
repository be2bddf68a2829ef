//! Names the commit the binary is built from, for `qlsched --version` and the metrics' build
//! info: `QLSCHED_BUILD_COMMIT` when set (a CI or packaging step), else `git rev-parse` in the
//! checkout, else "unknown". Never fails the build: a tarball without git builds as well.

use std::path::Path;
use std::process::Command;

/// Reruns the build script when `path` changes, if it exists.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

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
            // Rebuild when HEAD moves: HEAD itself, the branch it names, and packed refs. Only
            // files that exist are watched: cargo takes a missing one as changed on every build,
            // and a checkout that never packed its refs would rebuild this crate each time. A
            // branch whose ref is packed is watched through its folder, where a commit writes it.
            for path in ["HEAD", "packed-refs"] {
                if let Some(path) = git(&["rev-parse", "--git-path", path]) {
                    watch(Path::new(&path));
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
                && let Some(path) = git(&["rev-parse", "--git-path", &branch])
            {
                let path = Path::new(&path);
                match path.parent() {
                    Some(folder) if !path.exists() => watch(folder),
                    _ => watch(path),
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=QLSCHED_COMMIT={commit}");
}
