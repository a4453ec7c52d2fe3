#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Every error of the push SDK (seed 003 §6), with its Japanese message and recovery suggestion.
///
/// On Linux there is no URLSession round trip in this workload, so ``networkError(_:)`` carries an
/// error (a `URLError`, say) only when a caller supplies one. It takes any error, not `URLError`, so
/// that the workload links FoundationEssentials alone: `URLError` lives in FoundationNetworking. validation failures use ``invalidToken``,
/// ``invalidConfiguration(_:)`` and ``decodingError(_:)`` exactly as the seed's models do.
public enum PushNotificationError: Error, LocalizedError, Sendable {
    case permissionDenied
    case invalidToken
    case invalidConfiguration(String)
    case networkError(any Error)
    case serverError(statusCode: Int, message: String)
    case decodingError(DecodingError)

    public var errorDescription: String? {
        switch self {
        case .permissionDenied:
            "通知許可が拒否されました。設定アプリから許可してください。"
        case .invalidToken:
            "無効なデバイストークンです。"
        case .invalidConfiguration(let detail):
            "SDK設定が無効です: \(detail)"
        case .networkError(let error):
            "ネットワークエラー: \((error as? LocalizedError)?.errorDescription ?? String(describing: error))"
        case .serverError(let statusCode, let message):
            "サーバーエラー (\(statusCode)): \(message)"
        case .decodingError(let error):
            "レスポンスのデコードに失敗しました: \(Self.describe(error))"
        }
    }

    public var recoverySuggestion: String? {
        switch self {
        case .permissionDenied:
            "設定 > {アプリ名} > 通知 から通知を有効にしてください。"
        case .networkError:
            "ネットワーク接続を確認して、再試行してください。"
        case .serverError:
            "しばらく待ってから再試行してください。問題が続く場合はサポートにお問い合わせください。"
        default:
            nil
        }
    }

    /// A `DecodingError` as one line: what was wrong, and where (`aps.alert.title`).
    static func describe(_ error: DecodingError) -> String {
        let (context, what): (DecodingError.Context, String) = switch error {
        case .typeMismatch(_, let c): (c, "")
        case .valueNotFound(_, let c): (c, "")
        case .keyNotFound(let key, let c): (c, "\(key.stringValue) is missing")
        case .dataCorrupted(let c): (c, "")
        @unknown default: (DecodingError.Context(codingPath: [], debugDescription: "\(error)"), "")
        }
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        let detail = what.isEmpty ? context.debugDescription : what
        return path.isEmpty || !what.isEmpty ? detail : "\(path): \(detail)"
    }

    /// A `decodingError` for the value at `path` (`["aps", "alert", "title"]`).
    static func invalid(_ path: [String], _ message: String) -> PushNotificationError {
        .decodingError(.dataCorrupted(.init(codingPath: path.map(PushCodingKey.init), debugDescription: message)))
    }
}

/// A coding key made from a string, for the paths in ``PushNotificationError/decodingError(_:)``.
struct PushCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
