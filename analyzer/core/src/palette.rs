//! The one place colours come from: a stable colour per name (event type, producer, group), so
//! the GUI, the PNG renderings and every run of either show `running` in the same colour.
//!
//! Well-known set-top-box types get fixed colours; any other name is hashed (FNV-1a, stable
//! across runs and platforms) into a 24-colour qualitative palette.

/// An sRGB colour.
pub type Rgb = [u8; 3];

/// Colour for "others" (the slice of small values) and "void" (no data).
pub const OTHERS: Rgb = [160, 160, 160];

/// Background of empty areas in renderings.
pub const VOID: Rgb = [245, 245, 245];

/// The qualitative palette names are hashed into (Kelly's colours of maximum contrast, minus
/// white and black, then a few softer ones).
const PALETTE: [Rgb; 24] = [
    [0x1f, 0x77, 0xb4],
    [0xff, 0x7f, 0x0e],
    [0x2c, 0xa0, 0x2c],
    [0xd6, 0x27, 0x28],
    [0x94, 0x67, 0xbd],
    [0x8c, 0x56, 0x4b],
    [0xe3, 0x77, 0xc2],
    [0x7f, 0x7f, 0x7f],
    [0xbc, 0xbd, 0x22],
    [0x17, 0xbe, 0xcf],
    [0xa6, 0xce, 0xe3],
    [0xfb, 0x9a, 0x99],
    [0xb2, 0xdf, 0x8a],
    [0xfd, 0xbf, 0x6f],
    [0xca, 0xb2, 0xd6],
    [0xff, 0xe1, 0x19],
    [0x46, 0xf0, 0xf0],
    [0xf0, 0x32, 0xe6],
    [0x00, 0x80, 0x80],
    [0xaa, 0x6e, 0x28],
    [0x80, 0x00, 0x00],
    [0x80, 0x80, 0x00],
    [0x00, 0x00, 0x80],
    [0x3c, 0xb4, 0x4b],
];

/// Fixed colours of the types the collector reconstructs.
const KNOWN: [(&str, Rgb); 11] = [
    ("running", [0x2c, 0xa0, 0x2c]),
    // A CPU track draws `on_cpu` in each thread's process colour; this one is its legend's.
    ("on_cpu", [0x3c, 0xb4, 0x4b]),
    // The idle task on a CPU track, dimmed.
    ("cpu_idle", [0xdc, 0xdc, 0xdc]),
    ("irq", [0xd6, 0x27, 0x28]),
    ("softirq", [0xff, 0x7f, 0x0e]),
    ("syscall", [0x1f, 0x77, 0xb4]),
    ("user_function", [0x94, 0x67, 0xbd]),
    ("wakeup", [0x17, 0xbe, 0xcf]),
    ("allocated_bytes", [0x8c, 0x56, 0x4b]),
    ("marker", [0xe3, 0x77, 0xc2]),
    ("mark", [0xbc, 0xbd, 0x22]),
];

/// FNV-1a, 64 bits: the same on every platform and Rust version.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The colour of a name (type, producer or group): fixed for the known types, else hashed.
pub fn colour(name: &str) -> Rgb {
    if let Some((_, c)) = KNOWN.iter().find(|(n, _)| *n == name) {
        return *c;
    }
    if name == "others" {
        return OTHERS;
    }
    PALETTE[(fnv1a(name) % PALETTE.len() as u64) as usize]
}

/// Whether `name` is a type with a fixed colour (the collector's reconstructed types).
pub fn is_known(name: &str) -> bool {
    KNOWN.iter().any(|(n, _)| *n == name)
}

/// The colours of the entries of one chart (legend order), so that no two share one: each entry
/// gets its preferred colour unless another already has it — entries marked fixed (a known type,
/// a user's choice) first, then in order — else the next palette colour nobody in the chart uses,
/// then lighter and darker shades of the palette once its 24 colours are taken (216 colours in all;
/// past that, entries keep their preferred colour).
pub fn distinct(preferred: &[(Rgb, bool)]) -> Vec<Rgb> {
    let mut out: Vec<Option<Rgb>> = vec![None; preferred.len()];
    let mut used: Vec<Rgb> = Vec::with_capacity(preferred.len());
    let order = (0..preferred.len())
        .filter(|&i| preferred[i].1)
        .chain((0..preferred.len()).filter(|&i| !preferred[i].1));
    let mut spares = spares();
    for i in order {
        let want = preferred[i].0;
        let c = if used.contains(&want) {
            spares
                .by_ref()
                .find(|c| !used.contains(c) && !preferred.iter().any(|p| p.1 && p.0 == *c))
                .unwrap_or(want)
        } else {
            want
        };
        used.push(c);
        out[i] = Some(c);
    }
    out.into_iter().map(|c| c.unwrap_or(OTHERS)).collect()
}

/// The palette, then its lighter and darker shades: the colours an entry moves to when its own is
/// taken (never the greys of "others" and "void").
fn spares() -> impl Iterator<Item = Rgb> {
    PALETTE
        .iter()
        .copied()
        .chain((1..=4).flat_map(|k: u32| {
            let f = 0.18 * f64::from(k);
            PALETTE
                .iter()
                .flat_map(move |&c| [lighten(c, f.min(0.9)), shade(c, (1.0 - f).max(0.1))])
        }))
        .filter(|c| *c != OTHERS && *c != VOID)
}

/// Two colours a reader would take for one on a chart (two browns, two olives): closer than 64
/// in RGB distance.
fn alike(a: Rgb, b: Rgb) -> bool {
    let d: i32 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (i32::from(*x) - i32::from(y)).pow(2))
        .sum();
    d < 64 * 64
}

/// `c` blended towards white by `amount` (0 = unchanged, 1 = white): lighter shades for
/// stacked areas and partial opacity on white backgrounds.
pub fn lighten(c: Rgb, amount: f64) -> Rgb {
    let a = amount.clamp(0.0, 1.0);
    c.map(|v| (f64::from(v) + (255.0 - f64::from(v)) * a).round() as u8)
}

/// `c` with luminance scaled by `l` in 0..=1 (0 = black, 1 = unchanged): the Slick Graph
/// shading.
pub fn shade(c: Rgb, l: f64) -> Rgb {
    let l = l.clamp(0.0, 1.0);
    c.map(|v| (f64::from(v) * l).round() as u8)
}

/// A colour as `#rrggbb`.
pub fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// `#rrggbb` as a colour.
pub fn parse_hex(s: &str) -> Option<Rgb> {
    let h = s.strip_prefix('#')?;
    if h.len() != 6 || !h.is_ascii() {
        return None;
    }
    let byte = |i: usize| u8::from_str_radix(&h[i..i + 2], 16).ok();
    Some([byte(0)?, byte(2)?, byte(4)?])
}

/// The colours a user chose for event types and producers (by name, so they hold in every trace), over
/// the palette's; kept in a small JSON file of the user's configuration directory
/// ([`UserColours::default_path`]): `{"types": {"running": "#2ca02c"}, "producers": {...}}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserColours {
    /// Event type name → colour.
    pub types: std::collections::BTreeMap<String, Rgb>,
    /// Producer name → colour.
    pub producers: std::collections::BTreeMap<String, Rgb>,
}

impl UserColours {
    /// The colour of event type `name`: the user's, else the palette's.
    pub fn type_colour(&self, name: &str) -> Rgb {
        self.types
            .get(name)
            .copied()
            .unwrap_or_else(|| colour(name))
    }

    /// The colour of producer `name`: the user's, else the palette's.
    pub fn producer_colour(&self, name: &str) -> Rgb {
        self.producers
            .get(name)
            .copied()
            .unwrap_or_else(|| colour(name))
    }

    /// The colours of a trace's top-level producers (processes, CPUs, IRQ lines), `labels`, in a
    /// chart whose types are drawn in `type_colours`. A CPU track draws each thread in its
    /// process's colour beside states in their type's, so a process must not take a type's colour
    /// (the hashed `kernel` fell on `allocated_bytes`' brown) nor another top-level producer's:
    /// each keeps its own (the user's, else its name's) unless a type or a producer before it in
    /// name order has it, and then takes the next free palette colour. A user's choice is kept as is.
    /// The result does not depend on the order of `labels`, so the GUI and the PNGs agree.
    pub fn top_level_colours(&self, type_colours: &[Rgb], labels: &[&str]) -> Vec<Rgb> {
        let mut order: Vec<usize> = (0..labels.len()).collect();
        order.sort_by(|&a, &b| labels[a].cmp(labels[b]).then(a.cmp(&b)));
        let mut used: Vec<Rgb> = type_colours.to_vec();
        used.extend(order.iter().filter_map(|&i| self.producers.get(labels[i])));
        let mut out = vec![OTHERS; labels.len()];
        for i in order {
            let c = match self.producers.get(labels[i]) {
                Some(&c) => c,
                None => {
                    let want = self.producer_colour(labels[i]);
                    let free = |c: &Rgb| used.iter().all(|u| !alike(*u, *c));
                    if free(&want) {
                        want
                    } else {
                        spares()
                            .find(|c| free(c))
                            .or_else(|| spares().find(|c| !used.contains(c)))
                            .unwrap_or(want)
                    }
                }
            };
            used.push(c);
            out[i] = c;
        }
        out
    }

    /// `$SOCSCOPE_COLOURS` if set, else `colours.json` in `$XDG_CONFIG_HOME/socscope` (or
    /// `~/.config/socscope`); `None` without a home.
    pub fn default_path() -> Option<std::path::PathBuf> {
        let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
        if let Some(p) = var("SOCSCOPE_COLOURS") {
            return Some(p.into());
        }
        let config = var("XDG_CONFIG_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| var("HOME").map(|h| std::path::Path::new(&h).join(".config")))?;
        Some(config.join("socscope").join("colours.json"))
    }

    /// The colours saved in `path`; none when the file does not exist. Entries that are not `#rrggbb`
    /// are left out.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let section = |key: &str| -> std::collections::BTreeMap<String, Rgb> {
            doc.get(key)
                .and_then(|v| v.as_object())
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), parse_hex(v.as_str()?)?)))
                .collect()
        };
        Ok(Self {
            types: section("types"),
            producers: section("producers"),
        })
    }

    /// Writes the colours to `path` (its directory created), replacing the file at once.
    pub fn save(&self, path: &std::path::Path) -> Result<(), String> {
        let section = |m: &std::collections::BTreeMap<String, Rgb>| -> serde_json::Value {
            m.iter()
                .map(|(k, c)| (k.clone(), serde_json::Value::String(hex(*c))))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let doc = serde_json::json!({
            "types": section(&self.types),
            "producers": section(&self.producers),
        });
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text + "\n").map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chart_never_shows_two_entries_in_one_colour() {
        // thread_exit hashes to running's green: the known type keeps it, wherever it is listed.
        assert_eq!(colour("thread_exit"), colour("running"));
        let c = distinct(&[
            (colour("thread_exit"), false),
            (colour("running"), true),
            (colour("irq"), true),
        ]);
        assert_eq!(c[1], colour("running"));
        assert_eq!(c[2], colour("irq"));
        assert!(c[0] != c[1] && c[0] != c[2], "{c:?}");
        // Two producers of one name: one colour each.
        let c = distinct(&[(colour("cpu-burn"), false), (colour("cpu-burn"), false)]);
        assert_ne!(c[0], c[1]);
        assert_eq!(c[0], colour("cpu-burn"));
        // Many entries: all distinct up to 216, never grey.
        let many: Vec<(Rgb, bool)> = (0..216)
            .map(|i| (colour(&format!("t{i}")), false))
            .collect();
        let c = distinct(&many);
        let set: std::collections::BTreeSet<Rgb> = c.iter().copied().collect();
        assert_eq!(set.len(), 216);
        assert!(!set.contains(&OTHERS));
        assert!(distinct(&[]).is_empty());
    }

    #[test]
    fn a_process_never_takes_the_colour_of_a_type_of_its_chart() {
        // The hashed name of the kernel falls on a known type's colour.
        assert_eq!(colour("kernel"), colour("mark"));
        let types: Vec<Rgb> = ["running", "irq", "allocated_bytes", "mark", "syscall"]
            .map(colour)
            .to_vec();
        let u = UserColours::default();
        let procs = ["player", "kernel", "cpu0", "cpu1", "audio"];
        let c = u.top_level_colours(&types, &procs);
        let set: std::collections::BTreeSet<Rgb> = c.iter().copied().collect();
        assert_eq!(set.len(), procs.len(), "one colour each: {c:?}");
        for (name, got) in procs.iter().zip(&c) {
            assert!(
                types.iter().all(|t| !alike(*t, *got)),
                "{name} takes a colour like a type's: {got:?}"
            );
        }
        // Not even one like it: the GUI's `kernel (0)` hashes to a brown next to allocated_bytes'.
        assert!(alike(colour("kernel (0)"), colour("allocated_bytes")));
        let k = u.top_level_colours(&types, &["kernel (0)"]);
        assert!(!alike(k[0], colour("allocated_bytes")), "{k:?}");
        // A name whose colour is free keeps it (the first such in name order); the order of the
        // labels does not matter.
        let mut by_name: Vec<usize> = (0..procs.len()).collect();
        by_name.sort_by_key(|&i| procs[i]);
        let free = by_name
            .into_iter()
            .find(|&i| types.iter().all(|t| !alike(*t, colour(procs[i]))))
            .expect("a name off the types' colours");
        assert_eq!(c[free], colour(procs[free]));
        let rev = u.top_level_colours(&types, &["audio", "cpu1", "cpu0", "kernel", "player"]);
        assert_eq!(rev, [c[4], c[3], c[2], c[1], c[0]]);
        // A user's choice stands, even on a type's colour.
        let mut u = UserColours::default();
        u.producers.insert("kernel".into(), colour("irq"));
        assert_eq!(u.top_level_colours(&types, &procs)[1], colour("irq"));
    }

    #[test]
    fn user_colours_override_the_palette_and_survive_a_save() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep").join("colours.json");
        assert_eq!(UserColours::load(&path).unwrap(), UserColours::default());
        let mut c = UserColours::default();
        assert_eq!(c.type_colour("running"), colour("running"));
        c.types.insert("running".into(), [1, 2, 3]);
        c.producers.insert("vdec (319)".into(), [250, 0, 10]);
        assert_eq!(c.type_colour("running"), [1, 2, 3]);
        assert_eq!(c.producer_colour("vdec (319)"), [250, 0, 10]);
        assert_eq!(c.producer_colour("adec (320)"), colour("adec (320)"));
        c.save(&path).unwrap();
        assert_eq!(UserColours::load(&path).unwrap(), c);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"running\": \"#010203\""), "{text}");
        // A hand-edited file with a bad entry keeps the good ones.
        std::fs::write(&path, r##"{"types": {"irq": "#ff0000", "x": "red"}}"##).unwrap();
        let c = UserColours::load(&path).unwrap();
        assert_eq!(c.types.len(), 1);
        assert_eq!(c.type_colour("irq"), [255, 0, 0]);
        assert!(
            UserColours::load(dir.path()).is_err(),
            "a directory is not a colour file"
        );
        assert_eq!(parse_hex("#01abff"), Some([1, 0xab, 255]));
        assert_eq!(parse_hex("01abff"), None);
    }

    #[test]
    fn known_types_have_fixed_colours_and_others_are_stable() {
        assert_eq!(colour("running"), [0x2c, 0xa0, 0x2c]);
        assert_eq!(colour("others"), OTHERS);
        // Hashing is stable: the value is pinned so a change of hash shows up here.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(colour("kworker/0:1"), colour("kworker/0:1"));
        let distinct: std::collections::HashSet<Rgb> = ["a", "b", "c", "d", "e", "f", "g"]
            .iter()
            .map(|n| colour(n))
            .collect();
        assert!(distinct.len() >= 4, "{distinct:?}");
    }

    #[test]
    fn lighten_shade_hex() {
        assert_eq!(lighten([0, 100, 255], 0.5), [128, 178, 255]);
        assert_eq!(shade([200, 100, 0], 0.5), [100, 50, 0]);
        assert_eq!(shade([200, 100, 0], 0.0), [0, 0, 0]);
        assert_eq!(hex([1, 0xab, 255]), "#01abff");
    }
}
