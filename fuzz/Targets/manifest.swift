// libFuzzer entry for the `manifest` target; the property it checks is SyncFuzzTarget.manifest in fuzz/SyncProperties/.
// Build and run with scripts/fuzz.sh (make fuzz).
import SyncFuzzProperties

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try SyncFuzzTarget.manifest.check(input)
    } catch {
        fatalError("property violated: \(error)")
    }
    return 0
}
