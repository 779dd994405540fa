//! Puts memory.x where cortex-m-rt's link.x includes it from, and links with link.x.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-search={dir}");
    println!("cargo:rustc-link-arg=-Tlink.x");
    // The line tables (measure.sh's flash attribution, flash-owners.py) of functions the link dropped
    // point at an address no code has, not at 0 where they would overlap the image's first functions.
    println!("cargo:rustc-link-arg=-zdead-reloc-in-nonalloc=.debug_*=0xffffffff");
    println!("cargo:rerun-if-changed=memory.x");
}
