//! The erase-block walk behind `size = "auto"`: the smallest multiple of the erase block at
//! which a filesystem planner says the contents fit, shared by the FAT and exFAT planners.
//!
//! The walk goes upwards from a lower bound. A candidate that falls `m` bytes short lets it
//! jump by `m` (a volume `x` bytes larger holds at most `x` more bytes of clusters when the
//! cluster size only grows with the size), or one multiple at a time below `linear_below`
//! (where the planner may switch to smaller clusters as the size grows). Overheads that
//! shrink as a volume grows (alignment padding) make a fit possible below the first one found,
//! so after it the multiples below are checked down to the last size known not to fit.

/// A planner's verdict on one candidate size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Candidate<T> {
    /// The contents fit.
    Fits(T),
    /// They do not: at least `missing` bytes more are needed (0: unknown, try the next
    /// multiple), and why.
    Short {
        /// Bytes at least missing.
        missing: u64,
        /// The reason, for the message when no size fits.
        why: String,
    },
    /// No larger size can be tried (the disk cannot grow), and why.
    Stop(String),
}

/// Where and how far [`smallest_multiple`] walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The erase block: candidates are its multiples.
    pub erase_block: u64,
    /// The first candidate, in bytes (rounded down to a multiple, at least one).
    pub from_bytes: u64,
    /// The largest candidate, in bytes.
    pub ceiling_bytes: u64,
    /// Below this size the walk never jumps.
    pub linear_below: u64,
    /// Candidates planned at most.
    pub max_rounds: u32,
}

/// The smallest multiple of `w.erase_block` for which `eval` says [`Candidate::Fits`], as
/// `Ok(Ok(fit))`; `Ok(Err(why))` when none does (`why`: the last candidate's reason);
/// `size_of` gives a fit's size. `eval`'s own errors end the walk.
///
/// # Errors
/// Whatever `eval` returns.
pub fn smallest_multiple<T, E>(
    w: Walk,
    size_of: impl Fn(&T) -> u64,
    mut eval: impl FnMut(u64) -> Result<Candidate<T>, E>,
) -> Result<Result<T, Option<String>>, E> {
    let e = w.erase_block.max(1);
    let mut k = (w.from_bytes / e).max(1);
    let mut last_why = None;
    let mut failed: Option<u64> = None;
    let mut rounds: u32 = 0;
    while let Some(size) = k.checked_mul(e).filter(|&b| b <= w.ceiling_bytes) {
        rounds = rounds.saturating_add(1);
        if rounds > w.max_rounds {
            break;
        }
        match eval(size)? {
            Candidate::Fits(mut fit) => {
                while let Some(below) = size_of(&fit).checked_sub(e).filter(|&b| b > 0) {
                    if failed.is_some_and(|f| below <= f) {
                        break;
                    }
                    match eval(below)? {
                        Candidate::Fits(smaller) => fit = smaller,
                        _ => break,
                    }
                }
                return Ok(Ok(fit));
            }
            Candidate::Short { missing, why } => {
                failed = Some(size);
                last_why = Some(why);
                k = if size < w.linear_below {
                    k.saturating_add(1)
                } else {
                    k.saturating_add(missing.div_ceil(e).max(1))
                };
            }
            Candidate::Stop(why) => {
                last_why = Some(why);
                break;
            }
        }
    }
    Ok(Err(last_why))
}

/// Why no size fits, in the words `size = "auto"` refusals use: `"auto": no KIND volume holds
/// the contents (N files, SIZE of data[ with SIZE free])[: at the largest size tried, WHY]`.
#[must_use]
pub fn no_fit_reason(
    kind: &str,
    files: u64,
    file_bytes: u64,
    headroom_bytes: u64,
    last_why: Option<String>,
) -> String {
    format!(
        "\"auto\": no {kind} volume holds the contents ({files} files, {} of data{}){}",
        crate::format_size(file_bytes),
        if headroom_bytes > 0 {
            format!(" with {} free", crate::format_size(headroom_bytes))
        } else {
            String::new()
        },
        last_why.map_or_else(String::new, |w| format!(": at the largest size tried, {w}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(from: u64) -> Walk {
        Walk {
            erase_block: 4,
            from_bytes: from,
            ceiling_bytes: 1000,
            linear_below: 0,
            max_rounds: 100,
        }
    }

    #[test]
    fn finds_the_smallest_fit_after_a_jump_and_walks_down() {
        // Fits from 40 up, except 44 (a padding step); short by a lot at 8.
        let fits = |s: u64| s >= 40 && s != 44;
        let r: Result<_, ()> = smallest_multiple(
            walk(8),
            |&s: &u64| s,
            |s| {
                Ok(if fits(s) {
                    Candidate::Fits(s)
                } else {
                    Candidate::Short {
                        missing: 40u64.saturating_sub(s).max(1) + 8,
                        why: format!("{s}"),
                    }
                })
            },
        );
        // 8 is short by 40: the walk jumps to 48, then walks down to 40 (44 ends the walk
        // down, so 48 is what it finds: the multiple below it does not fit).
        assert_eq!(r, Ok(Ok(48)));
        let r: Result<_, ()> = smallest_multiple(
            walk(36),
            |&s: &u64| s,
            |s| {
                Ok(if fits(s) {
                    Candidate::Fits(s)
                } else {
                    Candidate::Short {
                        missing: 1,
                        why: String::new(),
                    }
                })
            },
        );
        assert_eq!(r, Ok(Ok(40)));
    }

    #[test]
    fn stops_at_the_ceiling_the_rounds_and_when_told() {
        let short = |_| -> Result<Candidate<u64>, ()> {
            Ok(Candidate::Short {
                missing: 0,
                why: "no".into(),
            })
        };
        assert_eq!(
            smallest_multiple(walk(4), |&s: &u64| s, short),
            Ok(Err(Some("no".into())))
        );
        let stop = |s: u64| -> Result<Candidate<u64>, ()> {
            Ok(if s < 20 {
                Candidate::Short {
                    missing: 4,
                    why: "short".into(),
                }
            } else {
                Candidate::Stop("full".into())
            })
        };
        assert_eq!(
            smallest_multiple(walk(4), |&s: &u64| s, stop),
            Ok(Err(Some("full".into())))
        );
        let err = |_| -> Result<Candidate<u64>, &str> { Err("boom") };
        assert_eq!(smallest_multiple(walk(4), |&s: &u64| s, err), Err("boom"));
    }
}
