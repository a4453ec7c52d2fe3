import ArgumentParser
import Foundation
import KVStore
import Workloads

/// `kvtool demo`: the seed notification flow across two processes.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the two-process trainer notification demo.",
        discussion: """
            This process plays the main app: it stores trainers in the shared defaults and an image in \
            Files/TrainerImages/. For each scenario it starts a separate extension process that reads them \
            and prints the sender it would show, falling back to the default trainer when data is missing \
            and going without the image when it cannot be read.
            """,
        subcommands: [Extension.self])

    static let defaultGroup = "group.com.yourcompany.VirtualTrainer"

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let group = (try? global.groupIdentifier()) ?? Self.defaultGroup
        let container = try SharedContainer(groupIdentifier: group, root: global.root)
        let trainers = TrainerNotificationFlow.sampleTrainers
        let selected = trainers[0]
        let pid = ProcessInfo.processInfo.processIdentifier
        print("container: \(container.path)")
        print("")

        print("1. main app (pid \(pid)) stores \(trainers.count) trainers, selects \(selected.displayName), writes its image")
        try TrainerNotificationFlow.publish(
            trainers: trainers, selected: selected.id,
            images: [selected.id: TrainerNotificationFlow.samplePNG], in: container, author: "app")
        try runExtension(group: group)

        print("2. main app replaces the image with bytes that are not a PNG")
        try container.files.write(Data("not a png".utf8), to: OshiTrainerTemplate.imagePath(for: selected.id))
        try runExtension(group: group)

        print("3. main app selects a trainer that is not stored")
        try container.defaults().set(UUID().uuidString, forKey: TrainerDefaultsKey.selectedTrainerId)
        try runExtension(group: group)

        print("4. the extension is configured with an App Group that does not exist")
        try runExtension(group: "group.com.yourcompany.Misconfigured")

        print("5. main app restores the trainer and its image")
        try TrainerNotificationFlow.publish(
            trainers: trainers, selected: selected.id,
            images: [selected.id: TrainerNotificationFlow.samplePNG], in: container, author: "app")
        try runExtension(group: group)

        let tool = (try? Self.executablePath()) ?? "kvtool"
        let options = " --group \(group)" + (global.root.map { " --root \($0)" } ?? "")
        print("Inspect it: \(tool) info\(options)")
        print("            \(tool) defaults read\(options)")
    }

    /// Starts `kvtool demo extension` as a separate process and relays what it prints.
    private func runExtension(group: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.executablePath())
        var arguments = ["demo", "extension", "--group", group]
        if let root = global.root { arguments += ["--root", root] }
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        for line in String(decoding: output, as: UTF8.self).split(separator: "\n") { print("   \(line)") }
        guard process.terminationStatus == 0 else {
            throw CLIError(.failure, "the extension process exited with status \(process.terminationStatus)")
        }
        print("")
    }

    static func executablePath() throws -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { throw CLIError(.failure, "cannot find the kvtool executable: \(String(cString: strerror(errno)))") }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The extension process: reads the shared container and prints the sender it would show.
    struct Extension: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The demo's notification-extension process (started by kvtool demo).",
            shouldDisplay: false)

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let group = (try? global.groupIdentifier()) ?? Demo.defaultGroup
            let sender = TrainerNotificationFlow.resolveSender(groupIdentifier: group, root: global.root)
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            let pid = ProcessInfo.processInfo.processIdentifier
            if global.json {
                let data = try JSONEncoder().encode(sender)
                print(String(decoding: data, as: UTF8.self))
            } else {
                print("extension (pid \(pid), max RSS \(usage.ru_maxrss / 1024) MiB): \(sender.summary)")
            }
        }
    }
}
