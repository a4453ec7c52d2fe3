#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A trainer the user can pick in the trainer app (seeds `000_…`/`001_…`). The main app stores the
/// list in the App Group's shared defaults under ``TrainerDefaultsKey/trainerTemplates``, the chosen
/// one's ID under ``TrainerDefaultsKey/selectedTrainerId``, and each image in the shared container at
/// `TrainerImages/<id>.png`.
public struct OshiTrainerTemplate: Codable, Hashable, Sendable {
    public var id: UUID
    /// The name shown as the notification's sender (`INPerson.displayName` on iOS).
    public var displayName: String
    public var personality: String
    /// The image's path relative to the container's shared files, or `nil` for none.
    public var imagePath: String?

    public init(id: UUID, displayName: String, personality: String, imagePath: String? = nil) {
        self.id = id
        self.displayName = displayName
        self.personality = personality
        self.imagePath = imagePath
    }

    /// The image's conventional path: `TrainerImages/<UUID>.png`.
    public static func imagePath(for id: UUID) -> String { "TrainerImages/\(id.uuidString).png" }

    /// The trainer the extension falls back to when data is missing or unreadable: 推乃 愛.
    public static let fallback = OshiTrainerTemplate(
        id: UUID(uuidString: "00000000-0000-4000-8000-000000000001")!,
        displayName: "推乃 愛", personality: "やさしく励ます", imagePath: nil)
}

/// The shared-defaults keys the seed apps use.
public enum TrainerDefaultsKey {
    public static let selectedTrainerId = "selectedTrainerId"
    public static let trainerTemplates = "trainerTemplates"
}
