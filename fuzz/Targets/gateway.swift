// libFuzzer entry for the `gateway` target; the property it checks is GatewayProperty in fuzz/GatewayProperties/.
// Build and run with scripts/fuzz.sh (make fuzz).
import GatewayFuzzProperties

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try GatewayProperty.check(input)
    } catch {
        fatalError("property violated: \(error)")
    }
    return 0
}
