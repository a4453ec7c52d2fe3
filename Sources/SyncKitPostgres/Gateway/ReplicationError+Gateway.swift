#if PostgreSQL
import SyncWire

extension ReplicationError {
    /// A sync gateway's refusal, from its HTTP status and one line of its reason: the one mapping, for
    /// every request and the live stream alike. `retryAfter` is the `Retry-After` header, if any.
    /// What the status means is ``GatewayStatus/meaning``'s (the table the gateway's metrics read too);
    /// a status no gateway sends is a server error.
    init(gatewayStatus status: Int, line: String, retryAfter: String?) {
        let server = ReplicationError.server("the sync gateway answered \(status): \(line)")
        guard let known = GatewayStatus(rawValue: status) else {
            self = server
            return
        }
        switch known.meaning {
        case .credential: self = .credentialRefused(line)
        case .deviceInUse: self = .deviceInUse(line)
        case .rate:
            let seconds = retryAfter.flatMap { Int($0) } ?? 1
            // The gateway's line names the budget (its words end with its own "; retry in N s").
            var budget = line
            if let retry = budget.range(of: "; retry in ", options: .backwards) { budget = String(budget[..<retry.lowerBound]) }
            self = .rateLimited(retryAfter: .seconds(min(max(seconds, 1), 3600)), budget: budget.isEmpty || budget == "(no reason given)" ? nil : budget)
        case .answered, .protocol, .capacity, .failure: self = server
        }
    }
}
#endif
