#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

/// What the notification service extension shows as the sender of a trainer's message: on iOS an
/// `INPerson` with `displayName`, `personHandle` and `image`.
public struct NotificationSender: Codable, Hashable, Sendable {
    public var displayName: String
    /// The trainer's ID, the person handle.
    public var handle: String
    /// Size of the image that loaded, or `nil` when the notification goes without one.
    public var imageBytes: Int?
    /// Why the extension fell back to the default trainer, or `nil` if it did not.
    public var fallbackReason: String?
    /// Why the image did not load, or `nil`.
    public var imageProblem: String?

    /// One line for people, as the demo prints it.
    public var summary: String {
        var line = "sender \(displayName) (handle \(handle))"
        if let imageBytes { line += ", image loaded (\(imageBytes) bytes)" }
        else { line += ", no image" + (imageProblem.map { " (\($0))" } ?? "") }
        if let fallbackReason { line += "; fell back to the default trainer: \(fallbackReason)" }
        return line
    }
}

/// The two sides of the seed notification flow, on top of a ``SharedContainer``.
public enum TrainerNotificationFlow {
    /// The App Group the demo's processes share when no group is given.
    public static let defaultGroup = "group.com.yourcompany.VirtualTrainer"

    /// The largest image the extension loads: it has a 24 MB memory budget on iOS.
    public static let maxImageSize = 8 << 20

    /// The main app's side: stores the trainers, the selected one, and their images, each image at
    /// the trainer's ``OshiTrainerTemplate/imagePath``. The defaults change in one transaction.
    ///
    /// The images are written in the same transaction (``KVStore/SharedFiles/write(_:to:in:modified:)-(Data,_,_,_)``):
    /// under a replicated prefix (`TrainerImages/`, issue 49) their manifest entries are committed with
    /// the trainers, so another device never receives a trainer without its image's entry, nor the
    /// reverse. Each path gets its image once the transaction has committed.
    public static func publish(trainers: [OshiTrainerTemplate], selected: UUID, images: [UUID: Data],
                               in container: SharedContainer, author: String = "app") throws {
        let defaults = try container.defaults()
        try container.store.write(author: author) { transaction in
            for (id, image) in images.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
                try container.files.write(image, to: OshiTrainerTemplate.imagePath(for: id), in: transaction)
            }
            try defaults.set(encodable: trainers, forKey: TrainerDefaultsKey.trainerTemplates, in: transaction)
            try defaults.set(selected.uuidString, forKey: TrainerDefaultsKey.selectedTrainerId, in: transaction)
        }
    }

    /// How long the extension waits, by default, for an image whose bytes are not on this device yet
    /// (``resolveSender(groupIdentifier:root:imageWait:)``): well inside the 30 s iOS gives a
    /// notification service extension, and short enough that a notification is never held for long.
    public static let defaultImageWait: Duration = .seconds(2)

    /// The extension's side: resolves the sender to show. It never throws: when the App Group cannot
    /// be opened or the data is missing or corrupt it falls back to ``OshiTrainerTemplate/fallback``,
    /// and when the image cannot be read it goes without one.
    ///
    /// The container is opened read-only. An image whose manifest row names bytes that are not on this
    /// device yet (``KVStore/SharedFilesError/notYetDownloaded(path:sha256:)``: the trainer arrived,
    /// its image is on its way) is asked for and waited for, up to `imageWait`, through SyncKit's
    /// `SharedContainer.readFile(_:within:maxSize:)`, from a read-write open made for that alone
    /// (asking is a write to the container's mailbox); the sync owner fetches it. At the deadline the
    /// sender goes without the image, and ``NotificationSender/imageProblem`` names `notYetDownloaded`.
    public static func resolveSender(groupIdentifier: String, root: String?, imageWait: Duration = .zero) -> NotificationSender {
        var (result, missing) = resolveSender(readOnly: groupIdentifier, root: root)
        guard let missing, imageWait > .zero else { return result }
        // The read-only open has ended (a process opens a store one way at a time).
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let container = try SharedContainer(groupIdentifier: groupIdentifier, root: root)
            load(try container.readFile(missing, within: imageWait, maxSize: maxImageSize), path: missing, into: &result)
        } catch let error as SharedFilesError {
            result.imageProblem = "notYetDownloaded after waiting \((clock.now - start).wholeMilliseconds) ms: \(error)"
        } catch {
            result.imageProblem = "\(error)"
        }
        return result
    }

    /// The sender as the read-only container shows it, and the image's path when its bytes are not
    /// here yet (the image is then missing from the sender).
    private static func resolveSender(readOnly groupIdentifier: String, root: String?) -> (NotificationSender, missing: String?) {
        let container: SharedContainer
        do {
            var options = SharedContainer.Options()
            options.readOnly = true
            container = try SharedContainer(groupIdentifier: groupIdentifier, root: root, options: options)
        } catch {
            return sender(.fallback, files: nil, fallbackReason: "the App Group is not available: \(error)")
        }
        let trainer: OshiTrainerTemplate
        do {
            let defaults = try container.defaults()
            guard let selected = try defaults.string(forKey: TrainerDefaultsKey.selectedTrainerId) else {
                return sender(.fallback, files: container.files, fallbackReason: "no trainer is selected")
            }
            guard let trainers = try defaults.value([OshiTrainerTemplate].self, forKey: TrainerDefaultsKey.trainerTemplates) else {
                return sender(.fallback, files: container.files, fallbackReason: "no trainers are stored")
            }
            guard let found = trainers.first(where: { $0.id.uuidString == selected }) else {
                return sender(.fallback, files: container.files, fallbackReason: "trainer \(selected) is not among the stored trainers")
            }
            trainer = found
        } catch {
            return sender(.fallback, files: container.files, fallbackReason: "the trainer data is unreadable: \(error)")
        }
        return sender(trainer, files: container.files, fallbackReason: nil)
    }

    private static func sender(_ trainer: OshiTrainerTemplate, files: SharedFiles?, fallbackReason: String?) -> (NotificationSender, missing: String?) {
        var result = NotificationSender(displayName: trainer.displayName, handle: trainer.id.uuidString,
                                        imageBytes: nil, fallbackReason: fallbackReason, imageProblem: nil)
        guard let path = trainer.imagePath else {
            result.imageProblem = "the trainer has no image"
            return (result, nil)
        }
        guard let files else {
            result.imageProblem = "the shared files are not available"
            return (result, nil)
        }
        do {
            // Exactly the bytes the manifest names, when the image replicates (issue 49).
            load(try files.readVerified(path, maxSize: maxImageSize), path: path, into: &result)
        } catch let error as SharedFilesError {
            result.imageProblem = "\(error)"
            if case .notYetDownloaded = error { return (result, path) }
        } catch {
            result.imageProblem = "\(error)"
        }
        return (result, nil)
    }

    /// The image's size into `result`, or why it is not a PNG.
    private static func load(_ data: Data, path: String, into result: inout NotificationSender) {
        guard data.starts(with: pngSignature) else {
            result.imageProblem = "\(path) is not a PNG image"
            return
        }
        result.imageBytes = data.count
        result.imageProblem = nil
    }

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// A valid 1×1 PNG, for demos and tests.
    public static let samplePNG = Data(base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")!

    /// The demo's trainers.
    public static let sampleTrainers: [OshiTrainerTemplate] = [
        OshiTrainerTemplate(id: UUID(uuidString: "6B1F3C2A-4D5E-4F60-8A7B-9C0D1E2F3A4B")!,
                            displayName: "星野 ミライ", personality: "元気いっぱい",
                            imagePath: OshiTrainerTemplate.imagePath(for: UUID(uuidString: "6B1F3C2A-4D5E-4F60-8A7B-9C0D1E2F3A4B")!)),
        OshiTrainerTemplate(id: UUID(uuidString: "A1B2C3D4-E5F6-4711-8899-AABBCCDDEEFF")!,
                            displayName: "月城 レイ", personality: "クールで的確",
                            imagePath: OshiTrainerTemplate.imagePath(for: UUID(uuidString: "A1B2C3D4-E5F6-4711-8899-AABBCCDDEEFF")!)),
    ]
}
