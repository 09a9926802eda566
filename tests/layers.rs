//! The import graph of every crate's library code has no circle.
//!
//! Each `.rs` file is a node; an arrow runs from a file to the file that *defines* what it names
//! through a path (`crate::…`, `super::…`, `self::…`, or a child module's name), in a `use` or
//! in an expression, with re-exports (`pub use`, `use`) followed to the defining file. `mod`
//! declarations are not arrows; `#[cfg(test)]` modules are left out. A circle (a strongly
//! connected set of two or more files) fails the test with the arrows that tie it.
//!
//! `MLX5_LAYERS=1 cargo test --test layers -- --nocapture` prints each crate's floors: floor 1
//! imports nothing of its crate, floor n imports only floors below n.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The crates checked: (name, source folder, root file, whether a circle fails the test). A crate
/// whose circles are still being taken apart reports them (`--nocapture`) without failing.
const CRATES: &[(&str, &str, &str, bool)] = &[
    ("mlx5", "src", "lib.rs", true),
    ("mlx5-ifc", "hw/ifc/src", "lib.rs", true),
    ("mlx5-sim", "hw/sim/src", "lib.rs", true),
    ("mlx5-vfio", "hw/vfio/src", "lib.rs", true),
    ("mlx5-vfio-user", "hw/vfio-user/src", "lib.rs", true),
    ("mlx5-tools", "tools/src", "lib.rs", true),
    (
        "mlx5-unikernel-example",
        "tools/unikernel/src",
        "lib.rs",
        true,
    ),
];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Hash,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Other,
}

/// Tokens of one file, without comments, strings or characters.
fn lex(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'#') | Some(b'"')) && {
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            b.get(j) == Some(&b'"')
        } {
            // Raw string r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push(Tok::Other);
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(Tok::Other);
        } else if c == b'\'' {
            // A character literal ('a', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            out.push(Tok::Other);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // b"…" and b'…' are byte strings and bytes.
            if &src[s..i] == "b" && matches!(b.get(i), Some(b'"') | Some(b'\'')) {
                continue;
            }
            if &src[s..i] == "br" && matches!(b.get(i), Some(b'"') | Some(b'#')) {
                i -= 1;
                continue;
            }
            out.push(Tok::Ident(src[s..i].to_string()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                if b[i] == b'.' && !b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                    break;
                }
                i += 1;
            }
            out.push(Tok::Other);
        } else {
            i += 1;
            out.push(match c {
                b':' if b.get(i) == Some(&b':') => {
                    i += 1;
                    Tok::Path
                }
                b'{' => Tok::Open,
                b'}' => Tok::Close,
                b',' => Tok::Comma,
                b';' => Tok::Semi,
                b'*' => Tok::Star,
                b'#' => Tok::Hash,
                b'[' => Tok::LBracket,
                b']' => Tok::RBracket,
                b'(' => Tok::LParen,
                b')' => Tok::RParen,
                b' ' | b'\n' | b'\t' | b'\r' => continue,
                _ => Tok::Other,
            });
        }
    }
    out
}

/// One file of a crate.
struct File {
    /// Its module path from the crate root.
    module: Vec<String>,
    /// Paths it names, each absolute from the crate root, with whether it came from a `use`
    /// and the name the `use` binds (for re-exports).
    paths: Vec<(Vec<String>, Option<String>)>,
    /// Out-of-line child modules that are `#[cfg(test)]`.
    test_children: BTreeSet<String>,
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// Parses a use tree at `i` with `prefix`; pushes (path, bound name). Returns the index after it.
fn use_tree(
    t: &[Tok],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        match t.get(i) {
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
                if t.get(i) == Some(&Tok::Path) {
                    i += 1;
                    continue;
                }
                let mut bound = prefix.last().cloned();
                if ident(t.get(i)) == Some("as") {
                    bound = ident(t.get(i + 1)).map(str::to_string);
                    i += 2;
                }
                if bound.as_deref() == Some("self") {
                    prefix.pop();
                    bound = prefix.last().cloned();
                }
                out.push((prefix, bound));
                return i;
            }
            Some(Tok::Star) => {
                out.push((prefix, Some("*".into())));
                return i + 1;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match t.get(i) {
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => i = use_tree(t, i, prefix.clone(), out),
                    }
                }
            }
            _ => return i,
        }
    }
}

/// Makes a path absolute: `crate::`, `super::`, `self::`, or a child's name.
fn absolute(
    module: &[String],
    path: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => {}
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The module at a point of a file, and its child modules.
fn scope(
    module: &[String],
    inline: &[(String, usize)],
    children: &BTreeSet<String>,
) -> (Vec<String>, BTreeSet<String>) {
    let here = module
        .iter()
        .cloned()
        .chain(inline.iter().map(|(n, _)| n.clone()))
        .collect();
    let kids = if inline.is_empty() {
        children.clone()
    } else {
        BTreeSet::new()
    };
    (here, kids)
}

fn parse(path: PathBuf, module: Vec<String>, children: &BTreeSet<String>) -> File {
    let src = fs::read_to_string(&path).expect("read source");
    let t = lex(&src);
    let mut paths = Vec::new();
    let mut test_children = BTreeSet::new();
    let mut pending = Vec::new();
    // Inline modules: (name, brace depth at its opening), and cfg(test) blocks to skip.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut cfg_test = false;
    let mut i = 0;
    while i < t.len() {
        match &t[i] {
            Tok::Hash => {
                // #[cfg(test)]
                if t.get(i + 1) == Some(&Tok::LBracket)
                    && ident(t.get(i + 2)) == Some("cfg")
                    && t.get(i + 3) == Some(&Tok::LParen)
                    && ident(t.get(i + 4)) == Some("test")
                    && t.get(i + 5) == Some(&Tok::RParen)
                {
                    cfg_test = true;
                }
                i += 1;
            }
            Tok::Ident(k) if k == "mod" => {
                let name = ident(t.get(i + 1)).unwrap_or_default().to_string();
                match t.get(i + 2) {
                    Some(Tok::Semi) => {
                        if cfg_test {
                            test_children.insert(name);
                        }
                        i += 3;
                    }
                    Some(Tok::Open) if cfg_test => {
                        // Skip the block.
                        let mut d = 0;
                        i += 2;
                        while i < t.len() {
                            match t[i] {
                                Tok::Open => d += 1,
                                Tok::Close => {
                                    d -= 1;
                                    if d == 0 {
                                        break;
                                    }
                                }
                                _ => {}
                            }
                            i += 1;
                        }
                        i += 1;
                    }
                    Some(Tok::Open) => {
                        depth += 1;
                        inline.push((name, depth));
                        i += 3;
                    }
                    _ => i += 1,
                }
                cfg_test = false;
            }
            Tok::Ident(k) if k == "use" => {
                let (here, kids) = scope(&module, &inline, children);
                let mut found = Vec::new();
                let end = use_tree(&t, i + 1, Vec::new(), &mut found);
                for (p, bound) in found {
                    match absolute(&here, &p, &kids) {
                        Some(abs) => paths.push((abs, bound)),
                        // Perhaps a name another `use` of this module binds (`use x::y;
                        // use y::Z;`): settled once the file is read.
                        None => pending.push((here.clone(), p, bound)),
                    }
                }
                i = end.max(i + 1);
                cfg_test = false;
            }
            Tok::Ident(k)
                if t.get(i + 1) == Some(&Tok::Path)
                    && (i == 0 || t[i - 1] != Tok::Path)
                    && (k == "crate"
                        || k == "super"
                        || k == "self"
                        || (inline.is_empty() && children.contains(k))) =>
            {
                let (here, kids) = scope(&module, &inline, children);
                let mut p = vec![k.clone()];
                let mut j = i + 1;
                while t.get(j) == Some(&Tok::Path) {
                    match t.get(j + 1) {
                        Some(Tok::Ident(s)) => {
                            p.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                if let Some(abs) = absolute(&here, &p, &kids) {
                    paths.push((abs, None));
                }
                i = j;
            }
            Tok::Open => {
                depth += 1;
                cfg_test = false;
                i += 1;
            }
            Tok::Close => {
                cfg_test = false;
                if inline.last().is_some_and(|&(_, d)| d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(_) | Tok::Semi | Tok::Comma => {
                if !matches!(&t[i], Tok::Ident(k) if k == "pub") {
                    cfg_test = cfg_test && matches!(&t[i], Tok::Ident(_));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    let bound: BTreeSet<String> = paths.iter().filter_map(|(_, b)| b.clone()).collect();
    for (here, p, b) in pending {
        if p.first().is_some_and(|h| bound.contains(h)) {
            paths.push((here.into_iter().chain(p).collect(), b));
        }
    }
    File {
        module,
        paths,
        test_children,
    }
}

/// Every module file under `dir`, with its module path.
fn files(dir: &Path, root: &str) -> Vec<(PathBuf, Vec<String>)> {
    fn walk(
        dir: &Path,
        module: &[String],
        root: Option<&str>,
        out: &mut Vec<(PathBuf, Vec<String>)>,
    ) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .expect("read dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if root.is_some() && name == "bin" {
                    continue;
                }
                let mut m = module.to_vec();
                m.push(name);
                walk(&p, &m, None, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let m = if Some(name.as_str()) == root || (root.is_none() && stem == "mod") {
                    module.to_vec()
                } else if root.is_some() && (stem == "main" || stem == "lib") {
                    continue; // The other crate root of a package with both.
                } else {
                    let mut m = module.to_vec();
                    m.push(stem.to_string());
                    m
                };
                out.push((p, m));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &[], Some(root), &mut out);
    out
}

struct Graph {
    names: Vec<String>,
    edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
}

fn graph(root_dir: &Path, dir: &str, root: &str) -> Graph {
    let base = root_dir.join(dir);
    let listed = files(&base, root);
    let modules: BTreeMap<Vec<String>, usize> = listed
        .iter()
        .enumerate()
        .map(|(i, (_, m))| (m.clone(), i))
        .collect();
    let parsed: Vec<File> = listed
        .iter()
        .map(|(p, m)| {
            let children: BTreeSet<String> = modules
                .keys()
                .filter(|k| k.len() == m.len() + 1 && k.starts_with(m))
                .map(|k| k[m.len()].clone())
                .collect();
            parse(p.clone(), m.clone(), &children)
        })
        .collect();
    // Files left out: cfg(test) children.
    let mut excluded = BTreeSet::new();
    for f in &parsed {
        for c in &f.test_children {
            let mut m = f.module.clone();
            m.push(c.clone());
            if let Some(&i) = modules.get(&m) {
                excluded.insert(i);
            }
        }
    }
    // Each file's bound names (for following re-exports).
    let bindings: Vec<BTreeMap<String, Vec<Vec<String>>>> = parsed
        .iter()
        .map(|f| {
            let mut m: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
            for (p, b) in &f.paths {
                if let Some(b) = b {
                    m.entry(b.clone()).or_default().push(p.clone());
                }
            }
            m
        })
        .collect();
    // Resolves a path to the files defining what it names.
    fn resolve(
        p: &[String],
        modules: &BTreeMap<Vec<String>, usize>,
        bindings: &[BTreeMap<String, Vec<Vec<String>>>],
        seen: &mut BTreeSet<Vec<String>>,
        out: &mut BTreeSet<usize>,
    ) {
        if !seen.insert(p.to_vec()) {
            return;
        }
        let Some(k) = (0..=p.len()).rev().find(|&k| modules.contains_key(&p[..k])) else {
            return;
        };
        let file = modules[&p[..k]];
        if let Some(name) = p.get(k) {
            if let Some(targets) = bindings[file].get(name) {
                for t in targets {
                    let mut next = t.clone();
                    next.extend(p[k + 1..].iter().cloned());
                    resolve(&next, modules, bindings, seen, out);
                }
                return;
            }
        }
        out.insert(file);
    }
    let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
    for (i, f) in parsed.iter().enumerate() {
        if excluded.contains(&i) {
            continue;
        }
        for (p, _) in &f.paths {
            let mut to = BTreeSet::new();
            resolve(p, &modules, &bindings, &mut BTreeSet::new(), &mut to);
            for j in to {
                if j != i && !excluded.contains(&j) {
                    let what = p.last().cloned().unwrap_or_default();
                    edges
                        .entry(i)
                        .or_default()
                        .entry(j)
                        .or_default()
                        .insert(what);
                }
            }
        }
    }
    let names = listed
        .iter()
        .map(|(p, _)| format!("{dir}/{}", p.strip_prefix(&base).unwrap().display()))
        .collect();
    Graph { names, edges }
}

/// Strongly connected sets of two or more files (Tarjan).
fn circles(g: &Graph) -> Vec<Vec<usize>> {
    struct T<'a> {
        g: &'a Graph,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T<'_>, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        let succ: Vec<usize> =
            t.g.edges
                .get(&v)
                .map(|m| m.keys().copied().collect())
                .unwrap_or_default();
        for w in succ {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut set = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                t.out.push(set);
            }
        }
    }
    let n = g.names.len();
    let mut t = T {
        g,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Floor of each file (1 + the highest floor it imports), when there is no circle.
fn floors(g: &Graph) -> Vec<usize> {
    let n = g.names.len();
    let mut floor = vec![0usize; n];
    fn f(g: &Graph, v: usize, floor: &mut Vec<usize>) -> usize {
        if floor[v] == 0 {
            floor[v] = 1; // Guards a circle.
            let succ: Vec<usize> = g
                .edges
                .get(&v)
                .map(|m| m.keys().copied().collect())
                .unwrap_or_default();
            let top = succ.into_iter().map(|w| f(g, w, floor)).max().unwrap_or(0);
            floor[v] = top + 1;
        }
        floor[v]
    }
    for v in 0..n {
        f(g, v, &mut floor);
    }
    floor
}

#[test]
fn no_circle_of_imports_in_any_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let print = std::env::var_os("MLX5_LAYERS").is_some();
    let mut report = String::new();
    for &(krate, dir, rootfile, strict) in CRATES {
        let g = graph(root, dir, rootfile);
        let found = circles(&g);
        let mut report_here = String::new();
        for set in &found {
            report_here.push_str(&format!("\n{krate}: a circle of {} files:\n", set.len()));
            for &a in set {
                for (&b, what) in g.edges.get(&a).into_iter().flatten() {
                    if set.contains(&b) {
                        let what: Vec<_> = what.iter().cloned().collect();
                        report_here.push_str(&format!(
                            "  {} -> {}: {}\n",
                            g.names[a],
                            g.names[b],
                            what.join(", ")
                        ));
                    }
                }
            }
        }
        if strict {
            report.push_str(&report_here);
        } else if !report_here.is_empty() {
            println!("not yet held to it:{report_here}");
        }
        if print {
            let fl = floors(&g);
            let top = fl.iter().copied().max().unwrap_or(0);
            println!("{krate} ({} files, {} floors)", g.names.len(), top);
            for level in (1..=top).rev() {
                let here: Vec<_> = (0..g.names.len())
                    .filter(|&v| fl[v] == level)
                    .map(|v| {
                        g.names[v]
                            .strip_prefix(dir)
                            .unwrap_or(&g.names[v])
                            .trim_start_matches('/')
                    })
                    .collect();
                println!("  floor {level:2}: {}", here.join(" "));
            }
        }
    }
    assert!(report.is_empty(), "imports run in circles:{report}");
}
