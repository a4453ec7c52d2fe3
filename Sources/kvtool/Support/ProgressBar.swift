import Foundation

/// A progress bar on standard error for long operations, drawn only when standard error is a
/// terminal: pipes, files and tests see nothing. Redrawn at most ten times a second.
final class ProgressBar {
    private let total: Int
    private let label: String
    private let enabled: Bool
    private var current = 0
    private var lastDraw = Date.distantPast
    private var drawn = false

    /// - Parameter total: the amount of work (entries, bytes…); 0 when unknown (a counter is shown).
    init(total: Int, label: String, enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.total = max(total, 0)
        self.label = label
        self.enabled = enabled
    }

    /// Records that `amount` more is done.
    func advance(by amount: Int = 1) {
        update(current + amount)
    }

    /// Records that `done` of the total is done.
    func update(_ done: Int) {
        current = done
        guard enabled else { return }
        let now = Date()
        guard now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        draw()
    }

    /// Erases the bar.
    func finish() {
        guard enabled, drawn else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        drawn = false
    }

    private func draw() {
        let line: String
        if total > 0 {
            let fraction = min(Double(current) / Double(total), 1)
            let width = 30
            let filled = Int(fraction * Double(width))
            line = "\(label) [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                + "] \(Int(fraction * 100))% \(current)/\(total)"
        } else {
            line = "\(label) \(current)"
        }
        FileHandle.standardError.write(Data(("\r" + line + "\u{1B}[K").utf8))
        drawn = true
    }
}
