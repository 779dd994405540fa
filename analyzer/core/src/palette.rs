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
const KNOWN: [(&str, Rgb); 9] = [
    ("running", [0x2c, 0xa0, 0x2c]),
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

#[cfg(test)]
mod tests {
    use super::*;

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
