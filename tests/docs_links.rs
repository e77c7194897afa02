//! Every relative link in README.md and under docs/ resolves: the file or folder it names
//! exists, and a `#anchor` into a Markdown file names one of its headings (GitHub's slugs).
//! The docs are split over many files that others move and rename; a link left dangling
//! would send a newcomer nowhere, and nothing else would notice.
//!
//! Std only and no server, so this binary builds and runs in a moment.

mod markdown;

use std::{
    collections::HashSet,
    fs,
    path::{Component, Path, PathBuf},
};

use markdown::{documents, prose_lines, without_code_spans};

/// The targets of a Markdown text's links and images: inline `[text](target "title")`,
/// reference definitions `[name]: target`, and HTML `href="…"` / `src="…"`.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(markdown) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = rest[..end].trim().trim_start_matches('<');
            let target = target.split([' ', '>']).next().unwrap_or_default();
            targets.push(target.to_string());
            rest = &rest[end..];
        }
        // A reference definition is a whole line `[label]: target`: its first `]` is
        // followed by the colon (a line that merely opens with a link is not one).
        let trimmed = line.trim_start();
        if let Some(label) = trimmed.strip_prefix('[')
            && let Some(close) = label.find(']')
            && let Some(rest) = label[close + 1..].strip_prefix(':')
        {
            let target = rest.split_whitespace().next().unwrap_or_default();
            targets.push(target.trim_matches(['<', '>']).to_string());
        }
        for attribute in ["href=\"", "src=\""] {
            for piece in line.split(attribute).skip(1) {
                targets.push(piece.split('"').next().unwrap_or_default().to_string());
            }
        }
    }
    targets.retain(|target| !target.is_empty() && !target.contains("://") && !target.starts_with("mailto:"));
    targets
}

/// GitHub's anchor for a heading's text: the rendered text (code and links as their
/// words), lowercased, with everything but letters, digits, `-`, `_` and spaces dropped,
/// and each space turned into a `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link renders as its text: keep `[text]`, drop `(target)`.
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = &rest[at + 2..];
        rest = &rest[rest.find(')').map_or(rest.len(), |end| end + 1)..];
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file: one per ATX heading (a repeated heading gets `-1`,
/// `-2`… as on GitHub), plus explicit HTML `id="…"` and `name="…"` anchors. Underlined
/// (setext) headings are not read: the docs do not use them, and a link to one would
/// fail here rather than pass unchecked.
fn anchors(markdown: &str) -> HashSet<String> {
    let mut found = HashSet::new();
    for line in prose_lines(markdown) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(line[hashes..].trim().trim_end_matches('#'));
            let mut anchor = base.clone();
            let mut repeat = 0;
            while !found.insert(anchor.clone()) {
                repeat += 1;
                anchor = format!("{base}-{repeat}");
            }
        }
        for attribute in [" id=\"", " name=\""] {
            for piece in line.split(attribute).skip(1) {
                found.insert(piece.split('"').next().unwrap_or_default().to_string());
            }
        }
    }
    found
}

/// `a/./b/../c` as `a/c`, without touching the file system; `None` when it climbs out of
/// the repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Every dangling link of `documents` under `root`, as `file: target (why)`.
fn dangling_links(root: &Path, documents: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for document in documents {
        let text = fs::read_to_string(root.join(document)).expect("a readable Markdown file");
        let folder = document.parent().unwrap_or(Path::new(""));
        for target in link_targets(&text) {
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = file.replace("%20", " ");
            let Some(resolved) =
                (if file.is_empty() { Some(document.clone()) } else { normalize(&folder.join(&file)) })
            else {
                problems.push(format!("{}: {target} (leaves the repository)", document.display()));
                continue;
            };
            if !root.join(&resolved).exists() {
                problems.push(format!("{}: {target} (no such file)", document.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && resolved.extension().is_some_and(|ext| ext == "md")
            {
                let linked = fs::read_to_string(root.join(&resolved)).expect("a readable Markdown file");
                if !anchors(&linked).contains(anchor) {
                    problems.push(format!("{}: {target} (no such heading)", document.display()));
                }
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let documents = documents(root);
    assert!(documents.len() > 1, "README.md and docs/*.md, found {documents:?}");
    let problems = dangling_links(root, &documents);
    assert!(problems.is_empty(), "dangling links:\n{}", problems.join("\n"));
}

/// The checker itself: a missing file, a missing heading and a path out of the repository
/// are each reported, while good links, external URLs and code are not.
#[test]
fn dangling_files_and_anchors_are_reported() {
    let root = std::env::temp_dir().join(format!("engram-docs-links-{}", std::process::id()));
    fs::create_dir_all(root.join("docs")).unwrap();
    fs::write(
        root.join("README.md"),
        "# Engram\n\n[ok](docs/a.md#the-api-v2) [ok](#engram) [web](https://example.com/x.md)\n\
         [gone](docs/missing.md) [bad anchor](docs/a.md#nowhere) [out](../outside.md)\n\
         `[code](not-a-link.md)`\n```\n[fenced](not-a-link.md)\n```\n\
         [ok](docs/a.md) scores are in [0, 1]: not a reference definition\n\
         [ref]: docs/gone-too.md\n",
    )
    .unwrap();
    fs::write(root.join("docs/a.md"), "## The API (v2)\n\n[back](../README.md#engram)\n").unwrap();

    let problems = dangling_links(&root, &documents(&root));
    fs::remove_dir_all(&root).unwrap();

    assert_eq!(
        problems,
        [
            "README.md: docs/missing.md (no such file)",
            "README.md: docs/a.md#nowhere (no such heading)",
            "README.md: ../outside.md (leaves the repository)",
            "README.md: docs/gone-too.md (no such file)",
        ]
    );
}

/// GitHub's slugs for the kinds of headings the docs use.
#[test]
fn heading_slugs_follow_github() {
    assert_eq!(slug("Use it from your agent"), "use-it-from-your-agent");
    assert_eq!(slug("`GET /v1/facts` — list, search"), "get-v1facts--list-search");
    assert_eq!(slug("Errors: the table"), "errors-the-table");
    assert_eq!(slug("[Link](x.md) and snake_case"), "link-and-snake_case");
    let repeated = anchors("# Setup\n## Setup\n");
    assert!(repeated.contains("setup") && repeated.contains("setup-1"), "{repeated:?}");
}
