// libFuzzer entry for the `catalog` target; the property it checks is FuzzTarget.catalog in fuzz/Properties/.
// Build and run with scripts/fuzz.sh (make fuzz).
import FuzzProperties

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try FuzzTarget.catalog.check(input)
    } catch {
        fatalError("property violated: \(error)")
    }
    return 0
}
