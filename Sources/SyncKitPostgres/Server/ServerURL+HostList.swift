#if PostgreSQL
import Foundation

extension ServerURL {
    /// Which of a host list's servers a connection keeps: libpq's `target_session_attrs`, with its values
    /// and its meanings (PostgreSQL 14 and later).
    public enum TargetSessionAttributes: String, Hashable, Sendable, CaseIterable {
        /// The first that answers (libpq's default).
        case any
        /// The first whose sessions are read-write: not in recovery, and `default_transaction_read_only`
        /// off. What a gateway and a device that push want: the primary, wherever it is after a failover.
        case readWrite = "read-write"
        /// The first whose sessions are read-only: a standby, or a primary made read-only.
        case readOnly = "read-only"
        /// The first that is not in recovery.
        case primary
        /// The first in recovery (a hot standby).
        case standby
        /// A standby if one answers, else any.
        case preferStandby = "prefer-standby"
    }

    /// `text` without its host list, and the host list (libpq's `H1:P1,H2:P2` after the user, which no
    /// URL parser takes): `postgres://kv@h1,h2:5433/db` is (`postgres://kv@/db`, `h1,h2:5433`).
    static func splitHostList(_ text: String) -> (rest: String, hostList: Substring) {
        guard let scheme = text.range(of: "://") else { return (text, "") }
        let afterScheme = text[scheme.upperBound...]
        let authorityEnd = afterScheme.firstIndex(where: { "/?#".contains($0) }) ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else {
            return (String(text[..<scheme.upperBound] + afterScheme[authorityEnd...]), authority)
        }
        let userInfo = authority[...at]
        return (String(text[..<scheme.upperBound] + userInfo + afterScheme[authorityEnd...]), authority[authority.index(after: at)...])
    }

    /// Each host of a host list, percent-decoded, with its port if it names one (`[::1]:5433`, `db`,
    /// `db:`, `%2Frun%2Fpostgresql`); as libpq, an empty port is the default one.
    static func parseHostList(_ list: Substring, invalid: (String) -> ReplicationError) throws -> [(host: String, port: Int?)] {
        try list.split(separator: ",", omittingEmptySubsequences: false).map { element in
            var hostText = element
            var portText: Substring = ""
            if element.hasPrefix("[") {
                guard let close = element.firstIndex(of: "]") else { throw invalid("the host '\(element)' has no closing ]") }
                hostText = element[element.index(after: element.startIndex)..<close]
                let after = element[element.index(after: close)...]
                guard after.isEmpty || after.hasPrefix(":") else { throw invalid("the host '\(element)' has text after its ]") }
                portText = after.dropFirst()
            } else if let colon = element.firstIndex(of: ":") {
                hostText = element[..<colon]
                portText = element[element.index(after: colon)...]
            }
            guard let host = String(hostText).removingPercentEncoding else {
                throw invalid("the host '\(hostText)' is not percent-encoded properly")
            }
            guard !portText.isEmpty else { return (host, nil) }
            guard portText.allSatisfy(\.isASCII), let port = Int(portText), (1...65_535).contains(port) else {
                throw invalid("the port '\(portText)' must be a number from 1 to 65535")
            }
            return (host, port)
        }
    }
}
#endif
