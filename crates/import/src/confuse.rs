//! A reader for libconfuse's configuration syntax, the language of genimage's `.cfg` files:
//! `key = value`, `key = {a, b}` lists, `name [title] { … }` sections, `func(args)` calls
//! (`include("file")`), `"…"` and `'…'` strings, `${VAR}` / `${VAR:-default}` from the
//! environment, `#`, `//` and `/* */` comments. Every node keeps the file and line it came
//! from, so the importer's messages can say `genimage.cfg:12`.
//!
//! Bounded by construction: input length, nesting depth, include depth and node count are
//! capped, and every loop advances through the input.

use crate::{Diag, Host};

/// Where a node came from: a file (index into [`Files`]) and a 1-based line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Loc {
    /// Index of the file in the reader's file list.
    pub file: usize,
    /// 1-based line.
    pub line: u32,
}

/// The files read (the top one first, then includes), for messages.
#[derive(Clone, Debug, Default)]
pub struct Files {
    /// Display names, in reading order.
    pub names: Vec<String>,
}

impl Files {
    /// `name:line` for a location.
    #[must_use]
    pub fn at(&self, loc: Loc) -> String {
        let name = self.names.get(loc.file).map_or("?", String::as_str);
        format!("{name}:{}", loc.line)
    }
}

/// One statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The option or section name.
    pub key: String,
    /// Where it starts.
    pub loc: Loc,
    /// What it holds.
    pub value: Value,
}

/// A statement's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `key = value` (strings, numbers and booleans are all text here).
    Scalar(String),
    /// `key = {a, b}`.
    List(Vec<String>),
    /// `key [title] { … }`.
    Section {
        /// The title (`image disk.img { … }`), if any.
        title: Option<String>,
        /// The statements inside.
        body: Vec<Node>,
    },
}

/// Input larger than this is refused (genimage configs are a few KiB).
pub const MAX_INPUT: usize = 4 << 20;
const MAX_DEPTH: usize = 32;
const MAX_INCLUDE_DEPTH: usize = 8;
const MAX_NODES: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    LBrace,
    RBrace,
    LParen,
    RParen,
    Comma,
    Eq,
    PlusEq,
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
    line: u32,
    file: usize,
}

/// Parses `text` (named `name`), reading includes through `host`.
pub fn parse(
    name: &str,
    text: &str,
    host: &dyn Host,
    files: &mut Files,
) -> Result<Vec<Node>, Diag> {
    let mut count = 0usize;
    parse_file(name, text, host, files, 0, &mut count)
}

fn parse_file(
    name: &str,
    text: &str,
    host: &dyn Host,
    files: &mut Files,
    include_depth: usize,
    count: &mut usize,
) -> Result<Vec<Node>, Diag> {
    let file = files.names.len();
    files.names.push(name.to_string());
    // Includes share one budget: every file read counts its bytes as statements of 64 bytes,
    // so a file that includes itself several times cannot multiply the work.
    *count = count.saturating_add(text.len().checked_div(64).unwrap_or(0));
    if *count > MAX_NODES.saturating_mul(2) {
        return Err(Diag::at(
            files,
            Loc { file, line: 1 },
            None,
            "the config and its includes are too large".into(),
        ));
    }
    if text.len() > MAX_INPUT {
        return Err(Diag::at(
            files,
            Loc { file, line: 1 },
            None,
            format!("is larger than {} MiB", MAX_INPUT >> 20),
        ));
    }
    let mut toks = Vec::new();
    let mut lx = Lexer {
        s: text.as_bytes(),
        i: 0,
        line: 1,
        file,
    };
    while let Some(t) = lx
        .next(host)
        .map_err(|(line, m)| Diag::at(files, Loc { file, line }, None, m))?
    {
        toks.push(t);
    }
    let mut p = Parser {
        toks: &toks,
        i: 0,
        host,
        include_depth,
        count,
    };
    let nodes = p.block(files, 0, false)?;
    Ok(nodes)
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.i.checked_add(k).and_then(|j| self.s.get(j)).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.s.get(self.i).copied()?;
        self.i = self.i.saturating_add(1);
        if c == b'\n' {
            self.line = self.line.saturating_add(1);
        }
        Some(c)
    }

    /// The next token with its line, or `None` at the end.
    fn next(&mut self, host: &dyn Host) -> Result<Option<(Tok, Loc)>, (u32, String)> {
        loop {
            let Some(c) = self.peek(0) else {
                return Ok(None);
            };
            match c {
                b' ' | b'\t' | b'\r' | b'\n' | b';' => {
                    self.bump();
                }
                b'#' => self.skip_line(),
                b'/' if self.peek(1) == Some(b'/') => self.skip_line(),
                b'/' if self.peek(1) == Some(b'*') => {
                    let start = self.line;
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err((start, "a /* comment is never closed".into())),
                            Some(b'*') if self.peek(0) == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                _ => break,
            }
        }
        let loc = Loc {
            file: self.file,
            line: self.line,
        };
        let Some(c) = self.bump() else {
            return Ok(None);
        };
        let tok = match c {
            b'{' => Tok::LBrace,
            b'}' => Tok::RBrace,
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b',' => Tok::Comma,
            b'=' => Tok::Eq,
            b'+' if self.peek(0) == Some(b'=') => {
                self.bump();
                Tok::PlusEq
            }
            b'"' => Tok::Str(self.quoted(b'"', host, loc.line)?),
            b'\'' => Tok::Str(self.quoted(b'\'', host, loc.line)?),
            _ => {
                let mut raw = vec![c];
                if c == b'$' && self.peek(0) == Some(b'{') {
                    while let Some(e) = self.bump() {
                        raw.push(e);
                        if e == b'}' {
                            break;
                        }
                        if e == b'\n' {
                            return Err((loc.line, "a ${ is never closed".into()));
                        }
                    }
                }
                while let Some(d) = self.peek(0) {
                    if d.is_ascii_whitespace() || b"{}(),=;#\"'".contains(&d) {
                        break;
                    }
                    if d == b'/' && matches!(self.peek(1), Some(b'/' | b'*')) {
                        break;
                    }
                    if d == b'+' && self.peek(1) == Some(b'=') {
                        break;
                    }
                    if d == b'$' && self.peek(1) == Some(b'{') {
                        // Keep `${…}` whole even if it holds separators (`${A:-x y}`).
                        while let Some(e) = self.bump() {
                            raw.push(e);
                            if e == b'}' {
                                break;
                            }
                            if e == b'\n' {
                                return Err((loc.line, "a ${ is never closed".into()));
                            }
                        }
                        continue;
                    }
                    raw.push(d);
                    self.bump();
                }
                let text = String::from_utf8(raw)
                    .map_err(|_| (loc.line, "is not UTF-8 text".to_string()))?;
                Tok::Word(expand(&text, host).map_err(|m| (loc.line, m))?)
            }
        };
        Ok(Some((tok, loc)))
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == b'\n' {
                break;
            }
            self.bump();
        }
    }

    fn quoted(&mut self, q: u8, host: &dyn Host, line: u32) -> Result<String, (u32, String)> {
        let mut out = Vec::new();
        loop {
            let Some(c) = self.bump() else {
                return Err((line, "a quoted string is never closed".into()));
            };
            if c == q {
                break;
            }
            if c == b'\\' {
                let Some(e) = self.bump() else {
                    return Err((line, "a quoted string is never closed".into()));
                };
                let v = match (q, e) {
                    (b'"', b'n') => b'\n',
                    (b'"', b't') => b'\t',
                    (b'"', b'r') => b'\r',
                    (b'"', b'f') => 0x0c,
                    (b'"', b'b') => 0x08,
                    (b'"', b'e') => 0x1b,
                    (_, b'\\') => b'\\',
                    (_, x) if x == q => q,
                    (b'"', b'$') => {
                        // `\$` keeps a literal dollar sign.
                        out.extend_from_slice(b"\\$");
                        continue;
                    }
                    (_, x) => {
                        out.push(b'\\');
                        x
                    }
                };
                out.push(v);
                continue;
            }
            out.push(c);
        }
        let text = String::from_utf8(out).map_err(|_| (line, "is not UTF-8 text".to_string()))?;
        if q == b'"' {
            expand(&text, host).map_err(|m| (line, m))
        } else {
            Ok(text)
        }
    }
}

/// Expands `${VAR}` and `${VAR:-default}` (libconfuse's environment references); `\$` is a
/// literal dollar sign. An unset variable without a default expands to nothing, as in
/// libconfuse.
fn expand(text: &str, host: &dyn Host) -> Result<String, String> {
    if !text.contains('$') {
        return Ok(text.to_string());
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        let (before, at) = rest.split_at(pos);
        if let Some(b) = before.strip_suffix('\\') {
            out.push_str(b);
            out.push('$');
            rest = at.get(1..).unwrap_or_default();
            continue;
        }
        out.push_str(before);
        let Some(inner) = at.strip_prefix("${") else {
            out.push('$');
            rest = at.get(1..).unwrap_or_default();
            continue;
        };
        let Some(end) = inner.find('}') else {
            return Err(format!(
                "{:?}: a ${{ is never closed",
                blockwise_geometry::display_str(text)
            ));
        };
        let (expr, after) = inner.split_at(end);
        let (name, default) = match expr.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (expr, None),
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "${{{}}} is not an environment variable name",
                blockwise_geometry::display_str(expr)
            ));
        }
        match host.env(name).filter(|v| !v.is_empty()) {
            Some(v) => out.push_str(&v),
            None => out.push_str(default.unwrap_or_default()),
        }
        rest = after.get(1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [(Tok, Loc)],
    i: usize,
    host: &'a dyn Host,
    include_depth: usize,
    count: &'a mut usize,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("{:?}", blockwise_geometry::display_str(w)),
        Tok::Str(s) => format!("the string {:?}", blockwise_geometry::display_str(s)),
        Tok::LBrace => "'{'".into(),
        Tok::RBrace => "'}'".into(),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::Comma => "','".into(),
        Tok::Eq => "'='".into(),
        Tok::PlusEq => "'+='".into(),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&(Tok, Loc)> {
        self.toks.get(self.i)
    }

    fn take(&mut self) -> Option<(Tok, Loc)> {
        let t = self.toks.get(self.i).cloned();
        if t.is_some() {
            self.i = self.i.saturating_add(1);
        }
        t
    }

    fn last_loc(&self) -> Loc {
        self.toks.last().map(|t| t.1).unwrap_or_default()
    }

    /// Statements up to `}` (when `nested`) or the end of the input.
    fn block(&mut self, files: &mut Files, depth: usize, nested: bool) -> Result<Vec<Node>, Diag> {
        if depth > MAX_DEPTH {
            return Err(Diag::at(
                files,
                self.peek().map_or(self.last_loc(), |t| t.1),
                None,
                format!("sections are nested more than {MAX_DEPTH} deep"),
            ));
        }
        let mut out = Vec::new();
        loop {
            let Some((tok, loc)) = self.take() else {
                if nested {
                    return Err(Diag::at(
                        files,
                        self.last_loc(),
                        None,
                        "a section is never closed (missing '}')".into(),
                    ));
                }
                return Ok(out);
            };
            let key = match tok {
                Tok::RBrace if nested => return Ok(out),
                Tok::Word(w) | Tok::Str(w) => w,
                other => {
                    return Err(Diag::at(
                        files,
                        loc,
                        None,
                        format!(
                            "expected an option or a section name, found {}",
                            describe(&other)
                        ),
                    ))
                }
            };
            *self.count = self.count.saturating_add(1);
            if *self.count > MAX_NODES.saturating_mul(2) {
                return Err(Diag::at(
                    files,
                    loc,
                    None,
                    "too many statements (the config and its includes)".into(),
                ));
            }
            match self.take() {
                Some((Tok::Eq | Tok::PlusEq, _)) => {
                    let value = self.value(files, &key, loc)?;
                    out.push(Node { key, loc, value });
                }
                Some((Tok::LBrace, _)) => {
                    let body = self.block(files, depth.saturating_add(1), true)?;
                    out.push(Node {
                        key,
                        loc,
                        value: Value::Section { title: None, body },
                    });
                }
                Some((Tok::Word(title) | Tok::Str(title), tloc)) => match self.take() {
                    Some((Tok::LBrace, _)) => {
                        let body = self.block(files, depth.saturating_add(1), true)?;
                        out.push(Node {
                            key,
                            loc,
                            value: Value::Section {
                                title: Some(title),
                                body,
                            },
                        });
                    }
                    other => {
                        return Err(Diag::at(
                            files,
                            other.as_ref().map_or(tloc, |t| t.1),
                            Some(&key),
                            format!(
                                "expected '=' or '{{' after {:?}, found {}",
                                blockwise_geometry::display_str(&key),
                                other.map_or("the end of the file".into(), |t| describe(&t.0))
                            ),
                        ))
                    }
                },
                Some((Tok::LParen, _)) => {
                    let args = self.args(files, &key, loc)?;
                    if key != "include" {
                        return Err(Diag::at(
                            files,
                            loc,
                            Some(&key),
                            format!(
                                "{:?}(…) is not a function genimage knows (only include(\"file\"))",
                                blockwise_geometry::display_str(&key)
                            ),
                        ));
                    }
                    let [file] = args.as_slice() else {
                        return Err(Diag::at(
                            files,
                            loc,
                            Some("include"),
                            "takes exactly one file name".into(),
                        ));
                    };
                    if self.include_depth >= MAX_INCLUDE_DEPTH {
                        return Err(Diag::at(
                            files,
                            loc,
                            Some("include"),
                            format!("includes are nested more than {MAX_INCLUDE_DEPTH} deep"),
                        ));
                    }
                    let from = files.names.get(loc.file).cloned().unwrap_or_default();
                    let (name, text) = self
                        .host
                        .include(file, &from)
                        .map_err(|e| Diag::at(files, loc, Some("include"), e))?;
                    let nodes = parse_file(
                        &name,
                        &text,
                        self.host,
                        files,
                        self.include_depth.saturating_add(1),
                        self.count,
                    )?;
                    out.extend(nodes);
                }
                other => {
                    return Err(Diag::at(
                        files,
                        other.as_ref().map_or(loc, |t| t.1),
                        Some(&key),
                        format!(
                            "expected '=' or '{{' after {:?}, found {}",
                            blockwise_geometry::display_str(&key),
                            other.map_or("the end of the file".into(), |t| describe(&t.0))
                        ),
                    ))
                }
            }
        }
    }

    fn value(&mut self, files: &Files, key: &str, loc: Loc) -> Result<Value, Diag> {
        match self.take() {
            Some((Tok::Word(w) | Tok::Str(w), _)) => Ok(Value::Scalar(w)),
            Some((Tok::LBrace, _)) => {
                let mut items = Vec::new();
                loop {
                    match self.take() {
                        Some((Tok::RBrace, _)) => return Ok(Value::List(items)),
                        Some((Tok::Word(w) | Tok::Str(w), _)) => {
                            items.push(w);
                            match self.take() {
                                Some((Tok::Comma, _)) => {}
                                Some((Tok::RBrace, _)) => return Ok(Value::List(items)),
                                other => {
                                    return Err(Diag::at(
                                        files,
                                        other.as_ref().map_or(loc, |t| t.1),
                                        Some(key),
                                        "a list continues with ',' or ends with '}'".into(),
                                    ))
                                }
                            }
                        }
                        other => {
                            return Err(Diag::at(
                                files,
                                other.as_ref().map_or(loc, |t| t.1),
                                Some(key),
                                "a list holds values separated by ','".into(),
                            ))
                        }
                    }
                }
            }
            other => Err(Diag::at(
                files,
                other.as_ref().map_or(loc, |t| t.1),
                Some(key),
                format!(
                    "expected a value after '=', found {}",
                    other.map_or("the end of the file".into(), |t| describe(&t.0))
                ),
            )),
        }
    }

    fn args(&mut self, files: &Files, key: &str, loc: Loc) -> Result<Vec<String>, Diag> {
        let mut args = Vec::new();
        loop {
            match self.take() {
                Some((Tok::RParen, _)) => return Ok(args),
                Some((Tok::Word(w) | Tok::Str(w), _)) => {
                    args.push(w);
                    match self.take() {
                        Some((Tok::Comma, _)) => {}
                        Some((Tok::RParen, _)) => return Ok(args),
                        other => {
                            return Err(Diag::at(
                                files,
                                other.as_ref().map_or(loc, |t| t.1),
                                Some(key),
                                "arguments are separated by ',' and end with ')'".into(),
                            ))
                        }
                    }
                }
                other => {
                    return Err(Diag::at(
                        files,
                        other.as_ref().map_or(loc, |t| t.1),
                        Some(key),
                        "arguments are separated by ',' and end with ')'".into(),
                    ))
                }
            }
        }
    }
}
