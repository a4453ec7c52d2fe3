import Foundation
import KVStore

/// The container's validation property, checked byte by byte (the kernel's view of a path) rather
/// than with Swift's `Character`s. The first input byte picks the check; the rest, as UTF-8 (invalid
/// sequences become U+FFFD), is the text checked.
///
/// - group identifier (selector % 3 == 0): `GroupIdentifier.init` either throws
///   `KVStoreError.invalidGroupIdentifier` (one line) or accepts an identifier that is `group.` and at
///   least two labels of 1–63 ASCII letters, digits and `-` (not first or last), at most 255 bytes:
///   so no `/`, `\`, NUL, `..` or non-ASCII byte.
/// - relative path (selector % 3 == 1): `SharedFiles.validate` either throws
///   `KVStoreError.invalidPath` (one line) or returns exactly the path's `/`-separated byte
///   components, none of which is empty, `.` or `..`, over 255 bytes, or holds a NUL, a control
///   character, a backslash, or something whose NFKC form is `.`, `..` or holds `/` or `\`, or starts
///   with `.kvtmp-`; the path is relative and at most 1024 bytes.
/// - container root (selector % 3 == 2): `ContainerRoot.resolve` of an absolute root gives the same
///   path as a byte-wise lexical normalisation (`.` and empty components dropped, `..` removing the
///   previous one), with no `.`, `..` or empty component left.
public enum PathProperty {
    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        guard let selector = input.first else { return .rejected("empty input") }
        let text = String(decoding: input.dropFirst(), as: UTF8.self)
        switch selector % 3 {
        case 0: return try groupIdentifier(text)
        case 1: return try relativePath(text)
        default: return try containerRoot(text)
        }
    }

    // MARK: GroupIdentifier

    static func groupIdentifier(_ raw: String) throws(PropertyViolation) -> FuzzOutcome {
        let group: GroupIdentifier
        do {
            group = try GroupIdentifier(raw)
        } catch let error as KVStoreError {
            guard case .invalidGroupIdentifier(let given, let reason) = error, given == raw, !reason.isEmpty else {
                throw PropertyViolation("GroupIdentifier(\(raw.debugDescription)) threw \(error), not invalidGroupIdentifier for the same text")
            }
            try oneLine(error.description, "GroupIdentifier(\(raw.debugDescription))")
            return .rejected("invalidGroupIdentifier")
        } catch {
            throw PropertyViolation("GroupIdentifier(\(raw.debugDescription)) threw \(type(of: error)): \(error)")
        }
        let bytes = Array(group.rawValue.utf8)
        let what = "GroupIdentifier accepted \(raw.debugDescription)"
        try require(group.rawValue.utf8.elementsEqual(raw.utf8), "\(what) but changed it to \(group.rawValue.debugDescription)")
        try require(bytes.count <= 255, "\(what): \(bytes.count) bytes")
        try require(bytes.starts(with: Array("group.".utf8)), "\(what): no 'group.' prefix")
        let labels = bytes.dropFirst(6).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        try require(labels.count >= 2, "\(what): \(labels.count) labels")
        for label in labels {
            try require((1 ... 63).contains(label.count), "\(what): a label of \(label.count) bytes")
            try require(label.allSatisfy(isLabelByte), "\(what): label \(hex(label)) has a byte that is not a letter, digit or '-'")
            try require(label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-"), "\(what): a label starts or ends with '-'")
        }
        return .accepted
    }

    static func isLabelByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
             UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"): true
        default: false
        }
    }

    // MARK: SharedFiles.validate

    static let slash = UInt8(ascii: "/")
    static let backslash = UInt8(ascii: "\\")
    static let temporaryPrefix = Array(".kvtmp-".utf8)

    static func relativePath(_ path: String) throws(PropertyViolation) -> FuzzOutcome {
        let components: [String]
        do {
            components = try SharedFiles.validate(path)
        } catch let error as KVStoreError {
            guard case .invalidPath(let given, let reason) = error, given == path, !reason.isEmpty else {
                throw PropertyViolation("SharedFiles.validate(\(path.debugDescription)) threw \(error), not invalidPath for the same text")
            }
            try oneLine(error.description, "SharedFiles.validate(\(path.debugDescription))")
            return .rejected("invalidPath")
        } catch {
            throw PropertyViolation("SharedFiles.validate(\(path.debugDescription)) threw \(type(of: error)): \(error)")
        }
        let what = "SharedFiles.validate accepted \(path.debugDescription)"
        let bytes = Array(path.utf8)
        try require(!bytes.isEmpty && bytes.count <= 1024, "\(what): \(bytes.count) bytes")
        try require(bytes.first != slash, "\(what): it is absolute")
        try require(!bytes.contains(0) && !bytes.contains(backslash), "\(what): it holds a NUL or a backslash")
        let kernelComponents = bytes.split(separator: slash, omittingEmptySubsequences: false).map { Array($0) }
        try require(components.map { Array($0.utf8) } == kernelComponents,
                    "\(what): it returned the components \(components.map(\.debugDescription)), but the kernel sees \(kernelComponents.map { String(decoding: $0, as: UTF8.self).debugDescription })")
        for component in kernelComponents {
            let name = String(decoding: component, as: UTF8.self)
            try require(!component.isEmpty, "\(what): an empty component")
            try require(component != [0x2E] && component != [0x2E, 0x2E], "\(what): a '.' or '..' component")
            try require(component.count <= 255, "\(what): a component of \(component.count) bytes")
            try require(!component.contains { $0 < 0x20 || $0 == 0x7F }, "\(what): a control character")
            try require(!component.starts(with: temporaryPrefix), "\(what): a component starts with '.kvtmp-'")
            let nfkc = Array(name.precomposedStringWithCompatibilityMapping.utf8)
            try require(nfkc != [0x2E] && nfkc != [0x2E, 0x2E], "\(what): \(name.debugDescription) normalises (NFKC) to '.' or '..'")
            try require(!nfkc.contains(slash) && !nfkc.contains(backslash),
                        "\(what): \(name.debugDescription) normalises (NFKC) to something with a path separator")
        }
        return .accepted
    }

    // MARK: ContainerRoot.resolve

    static func containerRoot(_ text: String) throws(PropertyViolation) -> FuzzOutcome {
        // Only absolute roots: a relative one is resolved against the current directory.
        let root = "/" + text
        let resolved: String
        do {
            resolved = try ContainerRoot.resolve(explicit: root, environment: [:])
        } catch let error as KVStoreError {
            guard case .invalidPath = error else {
                throw PropertyViolation("ContainerRoot.resolve(\(root.debugDescription)) threw \(error), not invalidPath")
            }
            try oneLine(error.description, "ContainerRoot.resolve(\(root.debugDescription))")
            return .rejected("invalidPath")
        } catch {
            throw PropertyViolation("ContainerRoot.resolve(\(root.debugDescription)) threw \(type(of: error)): \(error)")
        }
        let expected = normalize(Array(root.utf8))
        try require(Array(resolved.utf8) == expected,
                    "ContainerRoot.resolve(\(root.debugDescription)) is \(resolved.debugDescription), but byte-wise normalisation gives \(String(decoding: expected, as: UTF8.self).debugDescription)")
        return .accepted
    }

    /// Lexical normalisation of an absolute path, on bytes, as the kernel splits it.
    static func normalize(_ path: [UInt8]) -> [UInt8] {
        var parts: [ArraySlice<UInt8>] = []
        for part in path.split(separator: slash, omittingEmptySubsequences: true) {
            if part.elementsEqual([0x2E]) { continue }
            if part.elementsEqual([0x2E, 0x2E]) { if !parts.isEmpty { parts.removeLast() }; continue }
            parts.append(part)
        }
        var out: [UInt8] = [slash]
        for (i, part) in parts.enumerated() {
            if i > 0 { out.append(slash) }
            out.append(contentsOf: part)
        }
        return out
    }

    static func oneLine(_ description: String, _ what: String) throws(PropertyViolation) {
        try require(!description.utf8.contains { $0 == 0x0A || $0 == 0x0D }, "\(what): the error is not one line: \(description.debugDescription)")
    }
}
