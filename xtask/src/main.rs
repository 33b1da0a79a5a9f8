//! `cargo run -p xtask`: every structural check on this checkout, with what each read.

use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut failed = false;
    for check in xtask::CHECKS {
        let scan = (check.run)(&root);
        let short = scan.files < check.min_files || scan.lines < check.min_lines;
        println!(
            "{:32} {:6} files {:8} lines {:3} violations",
            check.name,
            scan.files,
            scan.lines,
            scan.violations.len()
        );
        for violation in &scan.violations {
            println!("    {violation}");
        }
        if short {
            println!(
                "    read less than {} files / {} lines: the check looked in the wrong place",
                check.min_files, check.min_lines
            );
        }
        failed |= short || !scan.violations.is_empty();
    }
    std::process::exit(i32::from(failed));
}
