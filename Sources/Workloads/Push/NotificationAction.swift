/// `UNNotificationActionOptions`, which Linux lacks: how an action button behaves.
public struct NotificationActionOptions: OptionSet, Codable, Hashable, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// Requires the device to be unlocked.
    public static let authenticationRequired = NotificationActionOptions(rawValue: 1 << 0)
    /// Shown as destructive (red).
    public static let destructive = NotificationActionOptions(rawValue: 1 << 1)
    /// Launches the app in the foreground.
    public static let foreground = NotificationActionOptions(rawValue: 1 << 2)

    /// `foreground`, `destructive`… for display.
    public var names: [String] {
        [(Self.authenticationRequired, "authenticationRequired"), (.destructive, "destructive"), (.foreground, "foreground")]
            .filter { contains($0.0) }.map(\.1)
    }
}

/// An action button of a notification (seed 003 §5), and the action sets of each category.
public struct NotificationAction: Codable, Hashable, Sendable {
    public let identifier: String
    public let title: String
    public let options: NotificationActionOptions

    public init(identifier: String, title: String, options: NotificationActionOptions = []) {
        self.identifier = identifier
        self.title = title
        self.options = options
    }

    /// The predefined actions of `categoryId`; none for an unknown category.
    public static func actions(forCategoryId categoryId: String) -> [NotificationAction] {
        switch categoryId {
        case "CONFIRM_CATEGORY":
            [NotificationAction(identifier: "CONFIRM", title: "確認", options: .foreground),
             NotificationAction(identifier: "LATER", title: "後で", options: [])]
        case "ACCEPT_DECLINE_CATEGORY":
            [NotificationAction(identifier: "ACCEPT", title: "受け入れる", options: .foreground),
             NotificationAction(identifier: "DECLINE", title: "拒否", options: .destructive)]
        default:
            []
        }
    }
}
