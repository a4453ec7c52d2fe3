/// The requests a sync gateway answers for its operators, beside the protocol's (``GatewayEndpoint``):
/// the health checks, on every address, and the Prometheus metrics, on the metrics address. They take
/// no credential.
package enum OperationsEndpoint: String, CaseIterable, Sendable {
    case healthz, readyz, metrics

    /// `/NAME`.
    package var path: String { "/\(rawValue)" }
}
