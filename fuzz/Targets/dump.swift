// libFuzzer entry for the `dump` target; the property it checks is DumpProperty in
// fuzz/DumpProperty/, compiled into this module with the kvtool files that parse dumps.
// Build and run with scripts/fuzz.sh (make fuzz).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        _ = try DumpProperty.check(input)
    } catch {
        fatalError("property violated: \(error)")
    }
    return 0
}
