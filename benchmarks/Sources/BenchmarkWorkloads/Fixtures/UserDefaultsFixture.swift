import Foundation

/// Foundation's UserDefaults with "key-0"…"key-99" → "value-0"…"value-99", in a suite of this process.
enum UserDefaultsFixture {
    nonisolated(unsafe) private static let built: UserDefaults = {
        let defaults = UserDefaults(suiteName: "kvstore-bench-\(getpid())")!
        for i in 0..<100 { defaults.set("value-\(i)", forKey: "key-\(i)") }
        return defaults
    }()

    static func shared() -> UserDefaults { built }
}
