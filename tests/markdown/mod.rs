//! What the documentation tests share: which files are the docs, and which of their text
//! is prose rather than code.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// README.md and every Markdown file under docs/, relative to the repository root.
pub fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("README.md")];
    let mut folders = vec![PathBuf::from("docs")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = fs::read_dir(root.join(&folder)) else { continue };
        for entry in entries {
            let path = folder.join(entry.expect("a readable docs folder").file_name());
            if root.join(&path).is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The lines of a Markdown text outside fenced code blocks: a `[x](y)` or a `#` inside an
/// example is not a link or a heading.
pub fn prose_lines(markdown: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<&str> = None;
    markdown.lines().filter(move |line| {
        let trimmed = line.trim_start();
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                match fence {
                    None => fence = Some(marker),
                    Some(open) if open == marker => fence = None,
                    Some(_) => {}
                }
                return false;
            }
        }
        fence.is_none()
    })
}

/// A line without its inline code spans, which render literally.
pub fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}
