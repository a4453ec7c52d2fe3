import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A progress bar on standard error for long operations (`dump`, `load`, `check`, `compact`, `bench`), drawn only when standard
/// error is a terminal (`isatty(2)`): piped or redirected, it prints nothing, so scripts and tests
/// see clean output.
///
/// ```swift
/// let progress = ProgressBar(total: entries.count, label: "loading")
/// for entry in entries { …; progress.advance(by: 1) }
/// progress.finish()
/// ```
///
/// It redraws at most every 100 ms (and when the percentage changes), on one line ending in `\r`;
/// ``finish()`` clears that line. Not thread-safe: use it from one thread.
final class ProgressBar {
    let total: Int
    let label: String
    private(set) var done = 0
    private let enabled: Bool
    private var lastDraw: UInt64 = 0
    private var lastPercent = -1
    private var finished = false

    /// - Parameters:
    ///   - total: the units of work (entries, bytes…); 0 draws an empty bar.
    ///   - label: what is being done, shown before the bar (`dumping`, `validating`, `loading`).
    ///   - enabled: whether to draw; by default, whether standard error is a terminal.
    init(total: Int, label: String, enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.total = max(total, 0)
        self.label = label
        self.enabled = enabled
    }

    /// Records `count` more units done and redraws if it is time to.
    func advance(by count: Int = 1) {
        done = min(total, done &+ max(count, 0))
        guard enabled, !finished else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        let percent = percentDone
        if percent != lastPercent || now &- lastDraw >= 100_000_000 {
            draw(percent)
            lastDraw = now
        }
    }

    /// Records that `count` units are done in all (for work that reports a running total).
    func update(_ count: Int) {
        advance(by: max(count, 0) - done)
    }

    /// Clears the bar from the terminal, leaving the line to what the command prints next (its
    /// summary, or its error). Calling it again does nothing.
    func finish() {
        guard !finished else { return }
        finished = true
        guard enabled, lastPercent >= 0 else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }

    private var percentDone: Int {
        total == 0 ? 100 : Int((Double(done) / Double(total) * 100).rounded(.down))
    }

    /// The line drawn for `percent`: `label [=========>          ]  45% 450/1000`.
    func line(_ percent: Int) -> String {
        let width = 30
        let filled = min(width, percent * width / 100)
        let bar = String(repeating: "=", count: filled) + (filled < width ? ">" + String(repeating: " ", count: width - filled - 1) : "")
        let percentText = String(percent)
        return "\(label) [\(bar)] " + String(repeating: " ", count: max(0, 3 - percentText.count)) + percentText + "% \(done)/\(total)"
    }

    private func draw(_ percent: Int) {
        lastPercent = percent
        FileHandle.standardError.write(Data(("\r" + line(percent) + "\u{1B}[K").utf8))
    }
}
