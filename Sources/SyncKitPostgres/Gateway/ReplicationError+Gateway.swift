#if PostgreSQL
import SyncWire

extension ReplicationError {
    /// A sync gateway's refusal, from its HTTP status and one line of its reason: the one mapping, for
    /// every request and the live stream alike. `retryAfter` is the `Retry-After` header, if any.
    init(gatewayStatus status: Int, line: String, retryAfter: String?) {
        switch status {
        case 401, 403: self = .credentialRefused(line)
        case 409: self = .deviceInUse(line)
        case 429:
            let seconds = retryAfter.flatMap { Int($0) } ?? 1
            // The gateway's line names the budget (its words end with its own "; retry in N s").
            var budget = line
            if let retry = budget.range(of: "; retry in ", options: .backwards) { budget = String(budget[..<retry.lowerBound]) }
            self = .rateLimited(retryAfter: .seconds(min(max(seconds, 1), 3600)), budget: budget.isEmpty || budget == "(no reason given)" ? nil : budget)
        default: self = .server("the sync gateway answered \(status): \(line)")
        }
    }
}
#endif
