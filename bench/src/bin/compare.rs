//! `compare`: the side-by-side benchmark (see the `bench` crate's docs, or `--help`).

fn main() -> std::process::ExitCode {
    bench::main()
}
