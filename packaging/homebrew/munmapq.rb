# Homebrew formula for munmapq, built from the release's source archive
# with Homebrew's Rust. The url and sha256 below are placeholders that
# scripts/dist.sh fills in for each release (its munmapq.rb, published
# with the release): a tap copies that file (docs/packaging.md).
class Munmapq < Formula
  desc "Defers and reuses munmaps of read-only file mappings in unmodified programs"
  homepage "https://github.com/munmapq/munmapq"
  url "https://github.com/munmapq/munmapq/releases/download/v0.1.0/munmapq-0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license any_of: ["MIT", "Apache-2.0"]
  head "https://github.com/munmapq/munmapq.git", branch: "main"

  depends_on "rust" => :build

  def install
    # The launcher's build script builds the library it embeds with a
    # nested cargo: the same toolchain, the same locked dependencies.
    system "cargo", "install", *std_cargo_args
    man1.install "munmapq.1"
    # `munmapq completions bash|zsh|fish`, generated from the options.
    generate_completions_from_executable(bin/"munmapq", "completions")
  end

  test do
    # Loads the embedded library into a program here and checks that it
    # defers and reuses: the same check a user runs.
    system bin/"munmapq", "selftest"
  end
end
